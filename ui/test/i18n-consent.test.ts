// The consent dialog words the backend's question in the person's language from its data
// (`needsConfirmation`'s `question`), so nobody approves a sentence half in English.
import { afterEach, describe, expect, it } from "vitest";
import { consentText } from "../src/lib/i18n/consent";
import { consent } from "../src/lib/consent.svelte";
import { settings } from "../src/lib/settings.svelte";
import type { Question } from "../src/lib/wire/types.gen";

afterEach(() => {
  settings.language = "en";
});

const wake = { kind: "action", title: "Wake", payload: "W", hex: false, lineEnding: "lf", onConnect: true, everyMs: null, to: "ADC board" } as const;
const poll = { kind: "action", title: "Poll ADC", payload: "52", hex: true, lineEnding: "none", onConnect: false, everyMs: 50, to: "" } as const;
const publisher = { kind: "publisher", url: "mqtt://broker.example:1883", topic: "lab/frames", rateHz: 10 } as const;

// (question, English, 简体中文, the data each must carry as it is)
const rows: [Question, string, string, string[]][] = [
  [
    { kind: "connects", programs: [], sends: [wake, poll] },
    "Connecting this project sends without a click: “Wake” sends “W” and a new line to ADC board when it connects; “Poll ADC” sends the bytes 52 every 50 ms while connected. Allow it?",
    "连接此项目后无需点击就会发送：“Wake”在连接时向 ADC board 发送“W”并换行；“Poll ADC”在连接期间每 50 毫秒发送字节 52。允许吗？",
    ["Wake", "ADC board", "Poll ADC", "52"],
  ],
  [
    { kind: "connects", programs: ["python3 rig.py"], sends: [publisher] },
    "This project runs `python3 rig.py` on this computer, as you. Connecting this project sends without a click: every frame is published to mqtt://broker.example:1883 on the topic “lab/frames”, 10 times a second. Allow it?",
    "此项目会以你的身份在这台电脑上运行 `python3 rig.py`。连接此项目后无需点击就会发送：每一帧都以每秒 10 次发布到 mqtt://broker.example:1883 的主题“lab/frames”。允许吗？",
    ["python3 rig.py", "mqtt://broker.example:1883", "lab/frames"],
  ],
  [
    { kind: "setsPrograms", commandLines: ["/bin/sh -c 'id'"] },
    "This sets a source to run `/bin/sh -c 'id'` on this computer, as you, when it connects. Allow it?",
    "这会让一个数据源在连接时以你的身份在这台电脑上运行 `/bin/sh -c 'id'`。允许吗？",
    ["/bin/sh -c 'id'"],
  ],
  [
    { kind: "writesOutside", path: "/srv/out.csv" },
    "This writes the file /srv/out.csv, outside your folders. Allow it?",
    "这会写入文件 /srv/out.csv，它在你的文件夹之外。允许吗？",
    ["/srv/out.csv"],
  ],
  [
    { kind: "replacesForeign", path: "/home/me/rig.ssproj", format: "project" },
    "/home/me/rig.ssproj is not a Sextant project (Sextant did not write it); this replaces it. Replace it anyway?",
    "/home/me/rig.ssproj 不是 Sextant 项目（不是 Sextant 写的）；这会替换它。仍要替换吗？",
    ["/home/me/rig.ssproj"],
  ],
];

describe("the consent question, in the person's language", () => {
  it.each(rows)("%o", (question, en, zh, data) => {
    settings.language = "en";
    expect(consentText(question)).toBe(en);
    settings.language = "zh";
    const chinese = consentText(question);
    expect(chinese).toBe(zh);
    // Nothing English is left once the data it quotes is taken out (Sextant is a name).
    let rest = chinese;
    for (const d of data) rest = rest.split(d).join("");
    expect(rest.replaceAll("Sextant", "")).not.toMatch(/[A-Za-z]{2,}/);
  });

  it("the dialog shows the worded question, and the backend's English when there is no data", async () => {
    settings.language = "zh";
    const answered = consent.ask("this writes the file /x, outside your folders – allow it?", { kind: "writesOutside", path: "/x" });
    expect(consent.current?.text).toBe("这会写入文件 /x，它在你的文件夹之外。允许吗？");
    consent.current?.answer(true);
    expect(await answered).toBe(true);
    const plain = consent.ask("an older backend's question");
    expect(consent.current?.text).toBe("An older backend's question");
    consent.current?.answer(false);
    expect(await plain).toBe(false);
  });
});
