/** The parts of the project model the dashboard and the widgets read (here, below both, so
 *  neither imports the other for its types). Every type comes from the Rust model through
 *  the generated wire types (`wire/types.gen.ts`), so a field renamed or retyped in Rust
 *  fails the UI's type check; the dashboard only requires fewer fields. */
import type * as Wire from "./wire/types.gen";

export type DatasetWidget = Wire.DatasetWidget;
export type GroupWidget = Wire.GroupWidget;
export type Role = Wire.Role;
/** Which of a dataset's views a tile shows. */
export type TileView = Wire.TileView;

/** `T`'s named fields, without the catch-all of fields a newer file may carry (`extra`). */
type Known<T> = { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] };
/** `T` with only the fields in `K` required: what the dashboard needs to draw it. */
type Reads<T, K extends keyof Known<T>> = Pick<Known<T>, K> & Partial<Omit<Known<T>, K>>;

export type Dataset = Reads<Wire.Dataset, "id" | "title" | "units">;

export type Group = Omit<Reads<Wire.Group, "id" | "title">, "datasets"> & { datasets: Dataset[] };

export type Tile = Reads<Wire.Tile, "x" | "y" | "w" | "h">;

export type Workspace = Omit<Reads<Wire.Workspace, "id" | "title">, "tiles"> & { tiles: Tile[] };

export type Project = Omit<Reads<Wire.Project, "title">, "groups" | "workspaces" | "sources"> & {
  groups: Group[];
  workspaces?: Workspace[];
  sources?: Reads<Wire.Source, "id" | "title">[];
};

export function allDatasets(p: Project | null): Dataset[] {
  return p?.groups?.flatMap((g) => g.datasets ?? []) ?? [];
}
