/** A person's yes to one call, for commands the backend runs only after one
 *  (`needsConfirmation`: the call runs a program, or writes outside the user's folders).
 *
 *  Every call goes through [`withConsent`]: when the backend answers `needsConfirmation`,
 *  the question it sent is put to the person (the shell shows it as a dialog) and, on a
 *  yes, the very same call is sent again as approved. A no rejects the call with `denied`,
 *  so each screen reports it like any other refusal. One question is shown at a time. */
import type { Question } from "../wire/types.gen";
import { CommandError, type Transport } from "./types";

/** Asks the person `question` (the backend's English words; `detail`, when it sent one,
 *  the same question as data to word in their language); resolves with their answer, or
 *  rejects when the question cannot be put (too many waiting): the call then fails with
 *  that reason and is not run. */
export type Asker = (question: string, detail?: Question) => Promise<boolean>;

/** `inner`, with `needsConfirmation` answers turned into a question to the person. */
export function withConsent(inner: Transport, ask: Asker): Transport {
  return {
    kind: inner.kind,
    async call<T = unknown>(command: string, params: unknown = {}, approved = false): Promise<T> {
      try {
        return await inner.call<T>(command, params, approved);
      } catch (e) {
        if (!(e instanceof CommandError) || e.code !== "needsConfirmation" || approved) throw e;
        if (!(await ask(e.message, e.question))) {
          throw new CommandError({ code: "denied", message: `not run: you said no (${e.message})` });
        }
        return inner.call<T>(command, params, true);
      }
    },
    onEvent: (handler) => inner.onEvent(handler),
    chat: (request) => inner.chat(request),
    credentials: (request) => inner.credentials(request),
    onChat: (handler) => inner.onChat(handler),
    display: (options, handler) => inner.display(options, handler),
    firstFrameDrawn: () => inner.firstFrameDrawn(),
  };
}
