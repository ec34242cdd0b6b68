// "Last edit: update dataset ds-2" was what a new user read; the runtime's labels now read
// as plain words naming the thing by its title, in English and 简体中文.
import { describe, expect, it } from "vitest";
import { editText, editWords } from "../src/screens/project/editLabel";
import { strings } from "../src/screens/strings";

const project = {
  groups: [{ id: "g-1", title: "Bench", datasets: [{ id: "ds-2", title: "Voltage" }] }],
  sources: [{ id: "src-1", title: "Rover" }],
  actions: [{ id: "act-1", title: "Poll" }],
  workspaces: [{ id: "ws-1", title: "Overview" }],
};

/** `t` over one language's table, filling `{name}` placeholders. */
const tOf = (table: Record<string, string>) => (key: string, vars: Record<string, string> = {}) => table[key].replace(/\{(\w+)\}/g, (_, k) => vars[k] ?? "");

describe("the edit history in plain words", () => {
  it.each([
    ["update dataset ds-2", "Changed the dataset “Voltage”", "修改了数据集“Voltage”"],
    ["add group", "Added a group", "添加了分组"],
    ["remove source src-9", "Removed a device", "删除了设备"],
    ["update source src-1", "Changed the device “Rover”", "修改了设备“Rover”"],
    ["move dataset ds-2", "Moved the dataset “Voltage”", "移动了数据集“Voltage”"],
    ["update action act-1", "Changed the action “Poll”", "修改了动作“Poll”"],
    ["remove workspace ws-1", "Removed the dashboard tab “Overview”", "删除了仪表板标签页“Overview”"],
    ["set transform of ds-2", "Changed the transform of “Voltage”", "修改了“Voltage”的变换"],
    ["rename project", "Renamed the project", "重命名了项目"],
    ["apply template \"gps\"", "Applied a template", "应用了模板"],
    ["something new", "A change to the project", "对项目的一处修改"],
    ["import /home/ana/bench.ssproj", "Imported “bench.ssproj”", "导入了“bench.ssproj”"],
    ["open C:\\lab\\rig.json", "Opened “rig.json”", "打开了“rig.json”"],
    ["new project", "Started a new project", "新建了项目"],
  ])("%s", (label, en, zh) => {
    expect(editWords(label, project, tOf(strings.en) as never)).toBe(en);
    expect(editWords(label, project, tOf(strings.zh) as never)).toBe(zh);
  });

  it("never shows an id, even when the thing is gone", () => {
    for (const label of ["update dataset ds-77", "remove group g-4", "set transform of ds-9"]) {
      const { vars } = editText(label, project);
      expect(JSON.stringify(vars)).not.toMatch(/ds-|g-\d/);
    }
  });
});
