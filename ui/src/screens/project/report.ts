/** The import report as the backend gives it (`report` of project.import, and of
 *  project.open / project.openContent when they imported a Serial Studio file): lines with
 *  a severity, the group/dataset/source they are about, a message and how many settings a
 *  line folds. Pure, so tests pin how it is read and ordered. */

import type { ImportReportLine, ReportSeverity } from "../../lib/wire/types.gen";

export type Severity = ReportSeverity;

/** A line as the backend sends it (generated from `sextant_import::SummaryItem`): `subject`
 *  is the group/dataset/source it is about, `path` where in the Serial Studio file, `count`
 *  how many settings the line folds. */
export type ReportLine = ImportReportLine;

const SEVERITIES: readonly Severity[] = ["lost", "changed", "note"];

/** The lines of a command result's `report`, or null when the result has none (a Sextant
 *  project was opened). Anything malformed is left out rather than shown half. */
export function reportLines(result: unknown): ReportLine[] | null {
  const raw = (result as { report?: unknown } | null)?.report;
  if (!Array.isArray(raw)) return null;
  const out: ReportLine[] = [];
  for (const r of raw) {
    if (!r || typeof r !== "object") continue;
    const o = r as Record<string, unknown>;
    const severity = SEVERITIES.find((s) => s === o.severity);
    if (!severity || typeof o.message !== "string") continue;
    const subject = (o.subject ?? {}) as Record<string, unknown>;
    out.push({
      severity,
      subject: { kind: typeof subject.kind === "string" ? subject.kind : "project", name: typeof subject.name === "string" ? subject.name : "" },
      message: o.message,
      path: typeof o.path === "string" ? o.path : "",
      count: typeof o.count === "number" && o.count > 0 ? o.count : 1,
    });
  }
  return out;
}

/** The report's sections in reading order – lost behaviour first – without empty ones. */
export function sections(lines: readonly ReportLine[]): { severity: Severity; lines: ReportLine[] }[] {
  return SEVERITIES.map((severity) => ({ severity, lines: lines.filter((l) => l.severity === severity) })).filter((s) => s.lines.length);
}
