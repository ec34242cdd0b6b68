// Item: chats started with the same words ("Please add a …") got titles the narrow list
// cut to the same "add a…". The title of a new chat skips that filler and keeps the nouns.
import { describe, expect, it } from "vitest";
import { render } from "svelte/server";
import { titleFrom } from "../src/chat/protocol";
import ChatList from "../src/chat/ChatList.svelte";

const SAME_START: [string, string][] = [
  ["Please add a gauge for the engine RPM", "Gauge for the engine RPM"],
  ["Please add a plot of the coolant temperature", "Plot of the coolant temperature"],
  ["please add a LED panel for the oil pressure alarm", "LED panel for the oil pressure alarm"],
  ["Can you add a map with the GPS track?", "Map with the GPS track?"],
  ["Could you please add an FFT of the vibration sensor", "FFT of the vibration sensor"],
  ["Hi! Can you create a new dashboard for the battery", "Dashboard for the battery"],
  ["I'd like to add a bar chart of cell voltages.", "Bar chart of cell voltages"],
  ["add a", "add a"],
  ["Can you remove the RPM gauge", "Remove the RPM gauge"],
  ["Why is the RPM reading zero?", "Why is the RPM reading zero?"],
  ["Make sure the parser handles negative numbers", "Make sure the parser handles negative numbers"],
  ["请帮我添加一个仪表盘，显示发动机转速", "仪表盘，显示发动机转速"],
  ["请帮我添加一个曲线图，显示冷却液温度", "曲线图，显示冷却液温度"],
  ["你能不能帮我加一个 GPS 地图", "GPS 地图"],
  ["请问为什么转速一直是零？", "请问为什么转速一直是零？"],
];

describe("a new chat's title from its first message", () => {
  it.each(SAME_START)("%s → %s", (message, title) => {
    expect(titleFrom(message)).toBe(title);
  });

  it("messages that start alike get titles that differ from their first words", () => {
    const en = SAME_START.slice(0, 7).map(([m]) => titleFrom(m));
    const zh = SAME_START.slice(11, 14).map(([m]) => titleFrom(m));
    for (const group of [en, zh]) {
      // What the narrow list shows before it cuts: the first few characters.
      expect(new Set(group.map((t) => t.slice(0, 3))).size).toBe(group.length);
    }
  });

  it("cuts at a word boundary with an ellipsis, never mid-word or on a dangling word", () => {
    const t = titleFrom("Please add a plot of the coolant temperature and the oil temperature over the last ten minutes", 40);
    expect(t.endsWith("…")).toBe(true);
    expect(t.length).toBeLessThanOrEqual(40);
    expect(t).toBe("Plot of the coolant temperature…");
    const words = "Plot of the coolant temperature and the oil temperature over the last ten minutes".split(" ");
    for (const w of t.slice(0, -1).split(" ")) expect(words).toContain(w);
    const zh = titleFrom("请帮我添加一个曲线图，显示冷却液温度和机油温度以及过去十分钟内的发动机转速变化情况", 16);
    expect(zh).toBe("曲线图，显示冷却液温度和机油温…");
  });

  it("only the first line, and a title the person typed short stays whole", () => {
    expect(titleFrom("\n  Gauge for RPM\nwith a red zone")).toBe("Gauge for RPM");
    expect(titleFrom("Gauge for RPM\nwith a red zone")).toBe("Gauge for RPM");
  });

  it("the list shows the whole title on hover", () => {
    const title = "Plot of the coolant temperature over the last minute";
    const store = { chats: [{ id: 1, title, createdUnixMs: 0, updatedUnixMs: 0, events: 1, running: false }], current: 1, settings: null, search: null };
    const { body } = render(ChatList, { props: { store: store as never } });
    expect(body).toContain(`title="${title}`);
  });
});
