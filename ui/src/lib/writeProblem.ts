/** A failed write (a recording, an export, a save) in the person's words: the backend
 *  classifies it (`sextant_fsutil::WriteProblem`), and each kind is worded here once, in
 *  every language; only an unclassified failure shows the system's own text. */
import { t } from "./i18n/index.svelte";
import type { WriteProblem } from "./wire/types.gen";

export type { WriteProblem };

export function writeProblemText(p: WriteProblem): string {
  switch (p.kind) {
    case "diskFull":
      return t("write.diskFull");
    case "denied":
      return t("write.denied");
    default:
      return t("write.other", { detail: p.detail });
  }
}
