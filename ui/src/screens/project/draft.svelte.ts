/** Editable copies of project objects. A draft follows its object when the object changes
 *  (a successful edit, undo, another client) and otherwise keeps what was typed, so a
 *  refused edit loses nothing. Updating in place (no re-created DOM) keeps focus. */
import { untrack } from "svelte";

const clone = <T>(v: T): T => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

export function draftOf<T>(get: () => T): { value: T } {
  const first = untrack(get);
  const box = $state({ value: clone(first) });
  let seen = JSON.stringify(first);
  $effect.pre(() => {
    const cur = get();
    const s = JSON.stringify(cur);
    if (s !== seen) {
      seen = s;
      untrack(() => (box.value = clone(cur)));
    }
  });
  return box;
}
