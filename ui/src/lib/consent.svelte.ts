/** The question the backend wants a person to answer before a call runs (see
 *  transport/consent.ts); the shell shows it as a dialog. Questions wait in line. */

import { consentText } from "./i18n/consent";
import { t } from "./i18n/index.svelte";
import type { Question as WireQuestion } from "./wire/types.gen";

interface Question {
  text: string;
  answer: (yes: boolean) => void;
}

/** Questions waiting behind the one on screen, at most. Each is a call held until the person
 *  answers; something asking faster than a person can answer (an action on a timer whose
 *  every run needs a yes) would otherwise queue dialogs without end. One past it is not
 *  asked: its call fails with the reason and is not run – what a no does, but without
 *  claiming the person said no. */
export const MAX_WAITING = 64;

export class ConsentQueue {
  /** The question on screen, if any. */
  current = $state<Question | null>(null);
  private waiting: Question[] = [];

  ask = (text: string, detail?: WireQuestion): Promise<boolean> =>
    new Promise((resolve, reject) => {
      if (this.current && this.waiting.length >= MAX_WAITING) {
        reject(new Error(t("consent.tooMany", { max: MAX_WAITING })));
        return;
      }
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
