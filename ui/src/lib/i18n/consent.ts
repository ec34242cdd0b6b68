/** A question the backend asks before a call runs (a `needsConfirmation` answer's
 *  `question`), worded in the person's language from its data: the backend's own message is
 *  English, and a question half in one language and half in another is not one a person
 *  can answer with confidence. The English here says what `sextant_commands::Question`'s
 *  `english()` says, as a sentence of its own. */
import type { Outgoing, Question } from "../wire/types.gen";
import { t } from "./index.svelte";

export function consentText(q: Question): string {
  switch (q.kind) {
    case "setsPrograms":
      return t("consent.setsPrograms", { programs: programs(q.commandLines) });
    case "writesOutside":
      return t("consent.writesOutside", { path: q.path });
    case "replacesForeign":
      return t("consent.replacesForeign", { path: q.path, format: t(`consent.format.${q.format}`) });
    case "connects": {
      const parts: string[] = [];
      if (q.programs.length) parts.push(t("consent.runs", { programs: programs(q.programs) }));
      if (q.sends.length) parts.push(t("consent.sends", { sends: q.sends.map(outgoing).join(t("consent.listSep")) }));
      parts.push(t("consent.allowIt"));
      return parts.reduce((first, next) => t("consent.then", { first, next }));
    }
  }
}

function programs(lines: string[]): string {
  return lines.map((l) => `\`${l}\``).join(t("consent.and"));
}

function outgoing(o: Outgoing): string {
  if (o.kind === "publisher") return t("consent.publisher", { url: o.url, topic: o.topic, rate: o.rateHz });
  if (o.kind === "postgres") return t("consent.postgres", { url: o.url, table: o.table });
  const when = o.onConnect
    ? o.everyMs != null
      ? t("consent.when.connectThenEvery", { ms: o.everyMs })
      : t("consent.when.connect")
    : o.everyMs != null
      ? t("consent.when.every", { ms: o.everyMs })
      : "";
  const ending = o.lineEnding === "lf" || o.lineEnding === "cr" || o.lineEnding === "crLf" ? t(`consent.ending.${o.lineEnding}`) : "";
  return t("consent.action", {
    title: o.title ? t("consent.titled", { title: o.title }) : t("consent.untitled"),
    what: o.hex ? t("consent.bytes", { hex: o.payload }) : t("consent.text", { text: o.payload }),
    ending,
    to: o.to ? t("consent.to", { to: o.to }) : "",
    when,
  });
}
