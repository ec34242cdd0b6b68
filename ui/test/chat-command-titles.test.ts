// Every command the assistant can call, and every tool of its own, reads as plain words on a
// tool card – in English and 简体中文 – never as the command's name ("Add a group: “Bench”",
// not "project.group.add").
import commandsMd from "../../docs/commands.md?raw";
import { describe, expect, it } from "vitest";
import { TITLED, subjectOf, titleKey } from "../src/chat/commandTitles";
import { strings } from "../src/chat/strings";

/** The registry's commands, from the generated reference (docs/commands.md). */
const registry = [...commandsMd.matchAll(/^## `([a-zA-Z.]+)`$/gm)].map((m) => m[1]);
/** The assistant's own tools (crates/assistant: tools.rs EXECUTE_COMMAND and DISCOVERY,
 *  skills.rs LOAD_SKILL, memory.rs PROPOSE, archive_tools.rs SEARCH and CITE). */
const ownTools = ["meta.executeCommand", "meta.describeCommand", "meta.listCommands", "meta.loadSkill", "assistant.memory.propose", "assistant.sessions.search", "assistant.sessions.cite"];

describe("tool card titles", () => {
  it("every command of the registry and every tool of the assistant has a title", () => {
    expect(registry.length).toBeGreaterThan(60);
    const missing = [...registry, ...ownTools].filter((n) => titleKey(n) === "chat.cmd.other");
    expect(missing).toEqual([]);
  });

  it("no title is a command, for a name nobody calls", () => {
    const known = new Set([...registry, ...ownTools]);
    expect(TITLED.filter((n) => !known.has(n))).toEqual([]);
  });

  it("each title is plain words in both languages", () => {
    for (const name of TITLED) {
      for (const table of [strings.en, strings.zh] as const) {
        const text = (table as Record<string, string>)[titleKey(name)];
        expect(text, name).toBeTruthy();
        expect(text, name).not.toMatch(/[a-z]+\.[a-z]|_|`|\{/);
      }
    }
  });

  it.each([
    [{ title: "Bench" }, "Bench"],
    [{ group: "g1", changes: { title: "Motor" } }, "Motor"],
    [{ group: "g1", dataset: { title: "Voltage", index: 1 } }, "Voltage"],
    [{ source: { title: "Rover", connection: {} } }, "Rover"],
    [{ id: "ds-2" }, null],
    [null, null],
  ])("%j acts on %s", (args, subject) => {
    expect(subjectOf(args)).toBe(subject);
  });
});
