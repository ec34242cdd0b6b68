/** The question the backend wants a person to answer before a call runs (see
 *  transport/consent.ts); the shell shows it as a dialog. Questions wait in line. */

import { consentText } from "./i18n/consent";
import type { Question as WireQuestion } from "./wire/types.gen";

interface Question {
  text: string;
  answer: (yes: boolean) => void;
}

class ConsentQueue {
  /** The question on screen, if any. */
  current = $state<Question | null>(null);
  private waiting: Question[] = [];

  ask = (text: string, detail?: WireQuestion): Promise<boolean> =>
    new Promise((resolve) => {
      const q: Question = {
        // Worded in the person's language when the backend sent the question as data; its
        // English otherwise, as a sentence of its own.
        text: detail ? consentText(detail) : text.charAt(0).toUpperCase() + text.slice(1),
        answer: (yes) => {
          resolve(yes);
          this.current = this.waiting.shift() ?? null;
        },
      };
      if (this.current) this.waiting.push(q);
      else this.current = q;
    });
}

export const consent = new ConsentQueue();
