/** What a tool card says it does: every command the assistant can call, by name, as plain
 *  words a person reads (English and 简体中文 in strings.ts), with the thing it acts on when
 *  the arguments name one ("Add a group: “Bench”"). The command's own name is never the
 *  title; a test checks every command of the registry (docs/commands.md) and every tool of
 *  the assistant has a title here. */
import type { Key } from "../lib/i18n/index.svelte";

/** The commands and tools with a title, by dotted name. */
export const TITLED = [
  "assistant.checkpoint",
  "assistant.listCheckpoints",
  "assistant.memory.propose",
  "assistant.restore",
  "assistant.sessions.cite",
  "assistant.sessions.search",
  "console.send",
  "csvExport.disable",
  "csvExport.enable",
  "csvExport.status",
  "csvPlayer.open",
  "dashboard.getView",
  "dashboard.image",
  "dashboard.latestFrame",
  "dashboard.setView",
  "dashboard.tail",
  "data.compare",
  "data.find",
  "data.series",
  "data.spectrum",
  "data.summary",
  "io.connect",
  "io.disconnect",
  "io.listSerialPorts",
  "io.recentBytes",
  "io.status",
  "mcapExport.disable",
  "mcapExport.enable",
  "mcapExport.status",
  "meta.describeCommand",
  "meta.executeCommand",
  "meta.listCommands",
  "meta.loadSkill",
  "mqtt.publisher.configure",
  "postgres.configure",
  "project.action.add",
  "project.action.remove",
  "project.action.run",
  "project.action.update",
  "project.control.preview",
  "project.control.send",
  "project.dataset.add",
  "project.dataset.get",
  "project.dataset.move",
  "project.dataset.remove",
  "project.dataset.update",
  "project.dryRun.endToEnd",
  "project.file",
  "project.frameParser.dryCompile",
  "project.frameParser.dryRun",
  "project.frameParser.get",
  "project.frameParser.setCode",
  "project.frameParser.setConfig",
  "project.get",
  "project.group.add",
  "project.group.remove",
  "project.group.update",
  "project.history",
  "project.import",
  "project.new",
  "project.open",
  "project.openContent",
  "project.quickPlot.keep",
  "project.redo",
  "project.save",
  "project.setTitle",
  "project.source.add",
  "project.source.list",
  "project.source.remove",
  "project.source.update",
  "project.template.apply",
  "project.transform.dryRun",
  "project.transform.set",
  "project.undo",
  "project.validate",
  "project.workspace.add",
  "project.workspace.list",
  "project.workspace.remove",
  "project.workspace.update",
  "replay.getState",
  "replay.setState",
  "sessions.csv",
  "sessions.delete",
  "sessions.download",
  "sessions.export",
  "sessions.exportCsv",
  "sessions.get",
  "sessions.list",
  "sessions.rename",
  "sessions.replay",
  "sessions.setDatabase",
  "sessions.startRecording",
  "sessions.stopRecording",
  "sessions.tag",
] as const;

export type Titled = (typeof TITLED)[number];

const titled = new Set<string>(TITLED);

/** The title's string key for a dotted command name, or the generic one. */
export function titleKey(name: string): Key {
  return (titled.has(name) ? `chat.cmd.${name}` : "chat.cmd.other") as Key;
}

/** What the call acts on, when its arguments name it: a title, a name, the title of what
 *  it adds or changes. */
export function subjectOf(args: unknown): string | null {
  if (!args || typeof args !== "object" || Array.isArray(args)) return null;
  const a = args as Record<string, unknown>;
  const pick = (o: unknown): string | null => {
    if (!o || typeof o !== "object") return null;
    const r = o as Record<string, unknown>;
    for (const k of ["title", "name"]) if (typeof r[k] === "string" && (r[k] as string).trim()) return (r[k] as string).trim();
    return null;
  };
  const found = pick(a) ?? pick(a.changes) ?? pick(a.group) ?? pick(a.dataset) ?? pick(a.source) ?? pick(a.action) ?? pick(a.workspace);
  return found && found.length > 60 ? `${found.slice(0, 59)}…` : found;
}
