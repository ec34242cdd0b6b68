/** Whether the docked console panel is open: terminal tiles hand their test hooks to it. */
export const consolePanel = $state({ open: false });
