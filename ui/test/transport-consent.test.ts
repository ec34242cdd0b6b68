// A call the backend runs only after a person's yes: asked once, repeated approved on yes,
// refused on no, never asked for other errors or for a call already approved.
import { describe, expect, it } from "vitest";
import { withConsent } from "../src/lib/transport/consent";
import { CommandError, type Transport } from "../src/lib/transport/types";

/** A backend that wants a yes for `io.connect` and fails `project.save` outright. */
function backend() {
  const calls: { command: string; approved: boolean }[] = [];
  const inner = {
    kind: "websocket",
    async call(command: string, _params: unknown, approved = false) {
      calls.push({ command, approved });
      if (command === "io.connect" && !approved) {
        throw new CommandError({ code: "needsConfirmation", message: "this project runs `sh -c id` – allow it?" });
      }
      if (command === "project.save") throw new CommandError({ code: "failed", message: "disk full" });
      return { ok: true };
    },
    onEvent: () => () => {},
    chat: async () => null,
    onChat: () => () => {},
    display: async () => () => {},
  } as unknown as Transport;
  return { inner, calls };
}

describe("consent for calls that need a person's yes", () => {
  it("asks with the backend's question and repeats the call approved on yes", async () => {
    const { inner, calls } = backend();
    const asked: string[] = [];
    const t = withConsent(inner, async (q) => (asked.push(q), true));
    await expect(t.call("io.connect")).resolves.toEqual({ ok: true });
    expect(asked).toEqual(["this project runs `sh -c id` – allow it?"]);
    expect(calls).toEqual([
      { command: "io.connect", approved: false },
      { command: "io.connect", approved: true },
    ]);
  });

  it("a no refuses the call without sending it again", async () => {
    const { inner, calls } = backend();
    const t = withConsent(inner, async () => false);
    await expect(t.call("io.connect")).rejects.toMatchObject({ code: "denied" });
    expect(calls).toHaveLength(1);
  });

  it("other errors and approved calls are never turned into questions", async () => {
    const { inner } = backend();
    let asked = 0;
    const t = withConsent(inner, async () => (asked++, true));
    await expect(t.call("project.save")).rejects.toMatchObject({ code: "failed" });
    await expect(t.call("io.connect", {}, true)).resolves.toEqual({ ok: true });
    expect(asked).toBe(0);
  });
});

describe("error codes", () => {
  it("read in the wire's camelCase, whatever spelling an older backend sent", () => {
    expect(new CommandError({ code: "needs_confirmation", message: "" }).code).toBe("needsConfirmation");
    expect(new CommandError({ code: "invalidParams", message: "" }).code).toBe("invalidParams");
    expect(new CommandError({ code: "denied", message: "" }).code).toBe("denied");
  });
});
