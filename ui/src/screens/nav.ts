/** Asks the shell to show another screen. The shell may listen for `sextant:navigate`
 *  (detail = screen name) and call preventDefault(); until it does, the sidebar button
 *  for that screen is clicked, which App.svelte already handles. */
export function navigate(screen: string): void {
  const ev = new CustomEvent("sextant:navigate", { detail: screen, cancelable: true });
  const handled = !window.dispatchEvent(ev);
  if (!handled) document.querySelector<HTMLButtonElement>(`[data-nav="${screen}"]`)?.click();
}
