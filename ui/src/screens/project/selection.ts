/** What the project editor's right-hand pane shows. */
export type Selection =
  | { kind: "source" | "parser" | "group" | "dataset" | "action" | "workspace"; id: string }
  | { kind: "addGroup" | "addDataset" | "addAction" | "addWorkspace" | "addSource"; id?: undefined; group?: string };

/** Whether a selection still names something in the project (after undo, remove…). */
export function exists(sel: Selection, p: Record<string, any> | null): boolean {
  if (!p || sel.kind.startsWith("add")) return true;
  const id = sel.id;
  switch (sel.kind) {
    case "source":
    case "parser":
      return (p.sources ?? []).some((s: any) => s.id === id);
    case "group":
      return (p.groups ?? []).some((g: any) => g.id === id);
    case "dataset":
      return (p.groups ?? []).some((g: any) => (g.datasets ?? []).some((d: any) => d.id === id));
    case "action":
      return (p.actions ?? []).some((a: any) => a.id === id);
    case "workspace":
      return (p.workspaces ?? []).some((w: any) => w.id === id);
  }
  return false;
}
