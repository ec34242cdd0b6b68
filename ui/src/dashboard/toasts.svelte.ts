/** In-app notifications (alarm episodes, save errors), mirrored to the system Notification
 *  API when the person allowed it. At most MAX_TOASTS stand at once (the oldest goes): a
 *  corner of the screen, not a wall. */

export interface Toast {
  id: number;
  level: "info" | "warn" | "alarm";
  title: string;
  body: string;
}

export const toasts: Toast[] = $state([]);
export const MAX_TOASTS = 4;
let nextId = 1;

export function notify(level: Toast["level"], title: string, body = "", system = false) {
  const id = nextId++;
  toasts.push({ id, level, title, body });
  while (toasts.length > MAX_TOASTS) toasts.shift();
  setTimeout(() => dismiss(id), level === "info" ? 5000 : 10000);
  if (system && typeof Notification !== "undefined") {
    try {
      if (Notification.permission === "granted") new Notification(title, { body });
      else if (Notification.permission === "default") void Notification.requestPermission();
    } catch {
      // Some webviews expose Notification but refuse to construct it.
    }
  }
}

export function dismiss(id: number) {
  const i = toasts.findIndex((t) => t.id === id);
  if (i >= 0) toasts.splice(i, 1);
}
