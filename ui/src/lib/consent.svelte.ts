/** The question the backend wants a person to answer before a call runs (see
 *  transport/consent.ts); the shell shows it as a dialog. Questions wait in line. */

interface Question {
  text: string;
  answer: (yes: boolean) => void;
}

class ConsentQueue {
  /** The question on screen, if any. */
  current = $state<Question | null>(null);
  private waiting: Question[] = [];

  ask = (text: string): Promise<boolean> =>
    new Promise((resolve) => {
      const q: Question = {
        // The backend's question reads as a sentence of its own here.
        text: text.charAt(0).toUpperCase() + text.slice(1),
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
