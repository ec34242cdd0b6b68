/** Asks the shell to show another screen: App.svelte listens for `sextant:navigate`
 *  (detail = screen name) and calls preventDefault() when it switched. If nothing handled
 *  it (no shell mounted yet), the sidebar button for that screen is clicked instead. */
export function navigate(screen: string): void {
  const ev = new CustomEvent("sextant:navigate", { detail: screen, cancelable: true });
  const handled = !window.dispatchEvent(ev);
  if (!handled) document.querySelector<HTMLButtonElement>(`[data-nav="${screen}"]`)?.click();
}
