/** One search of the chat archive (`searchSessions`, docs/ui-protocol.md): its query and
 *  filter, the pages read so far and the next page's cursor. The sidebar and the "Search
 *  all chats" view each hold one. Talks to the backend only through a `ChatBackend`.
 *
 *  A page is asked for with the cursor the previous one gave; when the archive changed in
 *  between, the backend refuses it ("search again") and this says so rather than mixing
 *  old and new results. Answers that come back after a newer search started are dropped. */
import type { ChatRequest, SearchHit, SearchPage, Surface, Visibility } from "../lib/wire/types.gen";
import { errorText } from "../screens/util";
import type { ChatBackend } from "./store.svelte";

export const SURFACES: Surface[] = ["current", "shadowed", "log_only"];

/** The most source chats one citation may name (spec 30, A3). */
export const MAX_CITED_CHATS = 3;

export type Scope = "all" | "project";

type SearchSessions = Extract<ChatRequest, { op: "searchSessions" }>;

/** The `searchSessions` request for a query, its filter and a cursor. */
export function searchRequest(query: string, surfaces: Surface[], visibility: Visibility, cursor: string | null, limit: number): SearchSessions {
  // All three is no narrowing: left out, so the backend's default holds.
  const narrowed = surfaces.length && surfaces.length < SURFACES.length;
  const filter = { visibility, ...(narrowed ? { surfaces: SURFACES.filter((s) => surfaces.includes(s)) } : {}) };
  return { op: "searchSessions", query: query.trim(), filter, limit, ...(cursor ? { cursor } : {}) };
}

/** Whether an error is the archive's "it changed since this search". */
export const isStale = (message: string) => /archive changed since this search/i.test(message);

export class ArchiveSearch {
  query = $state("");
  surfaces: Surface[] = $state([...SURFACES]);
  scope: Scope = $state("all");
  hits: SearchHit[] = $state([]);
  nextCursor: string | null = $state(null);
  loading = $state(false);
  /** The last search's error, the backend's words; "" when none. */
  error = $state("");
  /** The next page was refused because the archive changed: search again. */
  stale = $state(false);
  /** A search has answered since the query last changed. */
  searched = $state(false);

  private token = 0;

  /** `project`: the open project's file, asked when the scope is this project's chats. */
  constructor(
    private readonly backend: Pick<ChatBackend, "chat">,
    private readonly options: { limit?: number; project?: () => Promise<string | null> } = {},
  ) {}

  /** A fresh search (page one) of the current query and filter. */
  async run(): Promise<void> {
    const token = ++this.token;
    this.hits = [];
    this.nextCursor = null;
    this.stale = false;
    this.error = "";
    if (!this.query.trim()) {
      this.loading = false;
      this.searched = false;
      return;
    }
    await this.page(token, null);
  }

  /** The next page, continuing the last search. */
  async more(): Promise<void> {
    if (!this.nextCursor || this.loading) return;
    await this.page(this.token, this.nextCursor);
  }

  /** Forgets the query and its results. */
  clear() {
    this.token++;
    this.query = "";
    this.hits = [];
    this.nextCursor = null;
    this.loading = false;
    this.error = "";
    this.stale = false;
    this.searched = false;
  }

  private async page(token: number, cursor: string | null) {
    this.loading = true;
    try {
      const visibility: Visibility = this.scope === "project" ? { scope: "project", project: (await this.options.project?.()) ?? null } : { scope: "all" };
      const req = searchRequest(this.query, this.surfaces, visibility, cursor, this.options.limit ?? 20);
      const page = await this.backend.chat<SearchPage>(req);
      if (token !== this.token) return;
      this.hits = cursor ? [...this.hits, ...(page?.hits ?? [])] : (page?.hits ?? []);
      this.nextCursor = page?.nextCursor ?? null;
      this.searched = true;
    } catch (e) {
      if (token !== this.token) return;
      const message = errorText(e);
      this.stale = isStale(message);
      this.error = message;
      this.nextCursor = null;
    } finally {
      if (token === this.token) this.loading = false;
    }
  }
}
