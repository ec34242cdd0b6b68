/* Generated from Sextant's Rust types (src/lib/wire/schema.json) by scripts/gen-wire.mjs; do not edit.
 * Regenerate with `npm run gen:wire` after `SEXTANT_BLESS=1 cargo test -p sextant-api --test wire`. */

/**
 * The `format` key's only value; see [`FORMAT_MARKER`].
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "FileFormat".
 */
export type FileFormat = "sextant-project";
/**
 * Where the bytes come from. Secrets (passwords, keys) are never stored here: they live
 * in the OS keyring, looked up by source id.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Connection".
 */
export type Connection =
  | (SerialSettings & {
      type: "serial";
    })
  | {
      type: "tcp";
      host: string;
      port: number;
      /**
       * TLS to the device; its CA and a client certificate are credentials, kept with
       * the secrets, never here.
       */
      tls?: boolean;
    }
  | {
      type: "udp";
      localPort: number;
      remoteHost: string | null;
      remotePort: number | null;
      multicastGroup: string | null;
      /**
       * IPv4 address of the interface to join the group on; any when absent.
       */
      multicastInterface: string | null;
    }
  | (MqttSettings & {
      type: "mqtt";
    })
  | (CanSettings & {
      type: "can";
    })
  | (ModbusSettings & {
      type: "modbus";
    })
  | (BleSettings & {
      type: "ble";
    })
  | {
      type: "process";
      program: string;
      args: string[];
      workingDir: string | null;
    }
  | {
      type: "namedPipe";
      path: string;
    }
  | (SimulatorSettings & {
      type: "simulator";
    })
  | {
      type: "replay";
      /**
       * A capture (`sextant run --record`), a CSV export (`.csv`), or a message capture
       * (`.jsonl`: one message a line, handed to the source whole).
       */
      path: string;
      speed: number;
    };
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Parity".
 */
export type Parity = "none" | "even" | "odd" | "mark" | "space";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "StopBits".
 */
export type StopBits = "one" | "onePointFive" | "two";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "FlowControl".
 */
export type FlowControl = "none" | "rtsCts" | "xonXoff";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "MqttVersion".
 */
export type MqttVersion = "3.1.1" | "5";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "RegisterKind".
 */
export type RegisterKind = "coil" | "discrete" | "holding" | "input";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Waveform".
 */
export type Waveform = "sine" | "square" | "saw" | "noise" | "randomWalk";
/**
 * How frames are cut out of the byte stream.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "FrameMode".
 */
export type FrameMode = "endOnly" | "startEnd" | "startOnly" | "none";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "DelimiterFormat".
 */
export type DelimiterFormat = "text" | "hex";
/**
 * The checksum after a frame's end delimiter. By catalogue name: `crc8` is CRC-8/NRSC-5,
 * `crc16` CRC-16/CCITT-FALSE (IBM-3740), `crc16-modbus` CRC-16/MODBUS (sent low byte
 * first), `crc16-ccitt` CRC-16/XMODEM, `crc32` CRC-32/ISO-HDLC; `xor8`, `mod256`,
 * `fletcher16` and `adler32` are what they say.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ChecksumKind".
 */
export type ChecksumKind =
  | "none"
  | "xor8"
  | "mod256"
  | "crc8"
  | "crc16"
  | "crc16-modbus"
  | "crc16-ccitt"
  | "fletcher16"
  | "crc32"
  | "adler32";
/**
 * How a frame's payload is handed to the parser.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Decoder".
 */
export type Decoder = "plainText" | "hex" | "base64" | "binary" | "cobs" | "slip";
/**
 * Turns a decoded frame into values for parser slots 1, 2, 3…
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ParserConfig".
 */
export type ParserConfig =
  | {
      kind: "quickPlot";
    }
  | {
      kind: "delimited";
      separator: string;
    }
  | {
      kind: "fixedWidth";
      widths: number[];
    }
  | {
      kind: "keyValue";
      /**
       * Key at position `i` feeds slot `i + 1`.
       */
      keys: string[];
      pairSeparator: string;
      valueSeparator: string;
    }
  | {
      kind: "json";
      /**
       * Path at position `i` feeds slot `i + 1`, e.g. `imu.accel[0]` or `/imu/accel/0`;
       * `/values/Motor~1Speed` reaches a key with a `/` in it (`~1`, as in JSON Pointer).
       */
      paths: string[];
    }
  | {
      kind: "nmea";
    }
  | {
      kind: "binary";
      fields: BinaryField[];
    }
  | {
      kind: "script";
      language: ScriptLanguage;
      code: string;
    }
  | {
      kind: "can";
      messages: CanMessage[];
    };
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "BinaryType".
 */
export type BinaryType = "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "u64" | "i64" | "f32" | "f64";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Endian".
 */
export type Endian = "little" | "big";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ScriptLanguage".
 */
export type ScriptLanguage = "lua" | "javascript";
/**
 * How a signal's raw bits are read.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CanValueType".
 */
export type CanValueType = "unsigned" | "signed" | "float";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "GroupWidget".
 */
export type GroupWidget =
  | (
      | "none"
      | "dataGrid"
      | "multiPlot"
      | "accelerometer"
      | "gyroscope"
      | "gps"
      | "plot3d"
      | "barPanel"
      | "ledPanel"
      | "terminal"
      | "painter"
      | "image"
      | "webView"
    )
  | "output";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "DatasetWidget".
 */
export type DatasetWidget = "none" | "bar" | "gauge" | "compass" | "meter" | "clock";
/**
 * What a dataset means to a group widget (GPS, accelerometer, gyroscope, 3-D plot).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Role".
 */
export type Role = "lat" | "lon" | "alt" | "x" | "y" | "z" | "yaw" | "pitch" | "roll";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Severity".
 */
export type Severity = "info" | "warning" | "critical";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TransformLanguage".
 */
export type TransformLanguage = ("lua" | "javascript") | "expression";
/**
 * What a plot puts on its X axis.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "XAxis".
 */
export type XAxis =
  | {
      mode: "time";
    }
  | {
      mode: "samples";
    }
  | {
      mode: "dataset";
      id: string;
    };
/**
 * How a dataset's plot joins its points (`linear` when the dataset does not say).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Interpolation".
 */
export type Interpolation = "linear" | "step" | "stem" | "none";
/**
 * Which way a trigger's level is crossed.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TriggerEdge".
 */
export type TriggerEdge = "rising" | "falling";
/**
 * When a triggered plot redraws.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TriggerMode".
 */
export type TriggerMode = "auto" | "normal" | "single";
/**
 * How a waterfall colours power, from low to high.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Colormap".
 */
export type Colormap = "viridis" | "inferno" | "turbo" | "gray";
/**
 * How an output control looks and what value it hands its script.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ControlKind".
 */
export type ControlKind = "button" | "toggle" | "slider" | "knob" | "textField";
/**
 * How an image view finds its pictures in the byte stream.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ImageDetection".
 */
export type ImageDetection = "auto" | "markers";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "LineEnding".
 */
export type LineEnding = "none" | "lf" | "cr" | "crLf";
/**
 * When an action's timer runs (Serial Studio's timer modes, by what they do).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ActionTimer".
 */
export type ActionTimer = "whileConnected" | "startOnClick" | "toggleOnClick" | "repeat";
/**
 * One of the ways a dataset can be drawn (it may have several: a gauge, a plot, an FFT…).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TileView".
 */
export type TileView = ("plot" | "fft" | "led" | "waterfall") | "widget";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TableValue".
 */
export type TableValue = number | string;
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "PublishFormat".
 */
export type PublishFormat = "json" | "csv" | "raw";
/**
 * How much care a command needs before it runs.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Tier".
 */
export type Tier = "safe" | "confirm" | "deviceGated" | "alwaysConfirm" | "blocked";
/**
 * Machine-readable error codes (API clients match on them). Sent in camelCase like every
 * other value on the wire; the snake_case spellings of earlier versions are still read.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ErrorCode".
 */
export type ErrorCode =
  | ("unknownCommand" | "invalidParams")
  | "notAllowed"
  | "denied"
  | "failed"
  | "notFound"
  | "badRequest"
  | "needsConfirmation";
/**
 * A question a call needs a person's yes to.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Question".
 */
export type Question =
  | {
      kind: "setsPrograms";
      commandLines: string[];
    }
  | {
      kind: "writesOutside";
      path: string;
    }
  | {
      kind: "replacesForeign";
      path: string;
      format: WrittenFormat;
    }
  | {
      kind: "connects";
      programs: string[];
      sends: Outgoing[];
    };
/**
 * The kinds of file Sextant writes for a person.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "WrittenFormat".
 */
export type WrittenFormat = "project" | "csvExport" | "sessionsDatabase" | "sessionExport";
/**
 * Something that leaves for a device or the outside world without a click once a project
 * connects.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Outgoing".
 */
export type Outgoing =
  | {
      kind: "action";
      /**
       * The action's title; empty when it has none.
       */
      title: string;
      /**
       * The payload as written (hex digits when `hex`), shortened when long.
       */
      payload: string;
      hex: boolean;
      /**
       * What follows the payload: `none`, `lf`, `cr` or `crLf`.
       */
      lineEnding: string;
      /**
       * Sent once each time the source connects.
       */
      onConnect: boolean;
      /**
       * Sent this often while connected.
       */
      everyMs: number | null;
      /**
       * The destination source's title; empty when it has none.
       */
      to: string;
    }
  | {
      kind: "publisher";
      url: string;
      topic: string;
      rateHz: number;
    }
  | {
      kind: "postgres";
      url: string;
      table: string;
    };
/**
 * A request to the assistant's chat door, by `op` (docs/ui-protocol.md).
 */
export type ChatRequest =
  | {
      op: "list";
    }
  | {
      op: "create";
      title?: string | null;
    }
  | {
      op: "newChatFromHandoff";
      /**
       * The chat whose handoff seeds the new one.
       */
      chat: number;
      title?: string | null;
    }
  | {
      op: "searchSessions";
      query?: string;
      /**
       * What narrows a search. Every field is optional; empty means no narrowing.
       */
      filter?: {
        /**
         * Surfaces to include; all three when absent.
         */
        surfaces?: ("current" | "shadowed" | "log_only")[] | null;
        /**
         * Event kinds to include (`user_message`, `tool_result`, `checkpoint_created`, …).
         */
        kinds?: string[] | null;
        /**
         * Which chats; every chat when absent.
         */
        visibility?:
          | {
              scope: "all";
            }
          | {
              scope: "project";
              project?: string | null;
            };
        /**
         * Events at or after this time (Unix ms).
         */
        sinceUnixMs?: number | null;
        /**
         * Events at or before this time (Unix ms).
         */
        untilUnixMs?: number | null;
      };
      cursor?: string | null;
      /**
       * Hits per page (default 20, at most 100).
       */
      limit?: number | null;
    }
  | {
      op: "searchEvents";
      chat: number;
      query?: string;
      /**
       * What narrows a search. Every field is optional; empty means no narrowing.
       */
      filter?: {
        /**
         * Surfaces to include; all three when absent.
         */
        surfaces?: ("current" | "shadowed" | "log_only")[] | null;
        /**
         * Event kinds to include (`user_message`, `tool_result`, `checkpoint_created`, …).
         */
        kinds?: string[] | null;
        /**
         * Which chats; every chat when absent.
         */
        visibility?:
          | {
              scope: "all";
            }
          | {
              scope: "project";
              project?: string | null;
            };
        /**
         * Events at or after this time (Unix ms).
         */
        sinceUnixMs?: number | null;
        /**
         * Events at or before this time (Unix ms).
         */
        untilUnixMs?: number | null;
      };
      cursor?: string | null;
      /**
       * Hits per page (default 20, at most 100).
       */
      limit?: number | null;
    }
  | {
      op: "cite";
      chat: number;
      hits: {
        chat: number;
        seq: number;
      }[];
      /**
       * Which chats may be cited; every chat by default (the person's own archive).
       */
      visibility?:
        | {
            scope: "all";
          }
        | {
            scope: "project";
            project?: string | null;
          };
    }
  | {
      op: "rename";
      chat: number;
      title: string;
    }
  | {
      op: "delete";
      chat: number;
    }
  | {
      op: "history";
      chat: number;
    }
  | {
      op: "send";
      chat: number;
      text: string;
    }
  | {
      op: "retry";
      chat: number;
    }
  | {
      op: "approve";
      chat: number;
      callId: string;
    }
  | {
      op: "deny";
      chat: number;
      callId: string;
      reason?: string | null;
    }
  | {
      op: "approveAll";
      chat: number;
    }
  | {
      op: "cancel";
      chat: number;
    }
  | {
      op: "getSettings";
    }
  | {
      op: "setSettings";
      /**
       * Which wire format the provider speaks.
       */
      provider?: "anthropic" | "openai-compatible";
      baseUrl?: string;
      model?: string;
      autoApproveEdits?: boolean;
      allowDeviceControl?: boolean;
      /**
       * Spec 20 §2: the remembered facts go with every request (when there is a store),
       * after the cache breakpoint, in an envelope.
       */
      memory?: boolean;
      /**
       * Spec 20 §1: the sentinel instruction in the role block, its strip and its verdicts.
       */
      contextProbe?: boolean;
      /**
       * Spec 20 §3: a chat started from another carries that chat's digest.
       */
      handoffSeeding?: boolean;
      /**
       * Spec 20 §5: each successful edit is checked by a Safe command, and the outcome is in
       * its result.
       */
      autoVerify?: boolean;
      /**
       * Spec 20 §4: a message that names a domain gets its skill loaded by the app.
       */
      skillRouting?: boolean;
      /**
       * Spec 30 A2–A3: the model may search and cite this project's chats.
       */
      archiveTools?: boolean;
      /**
       * Spec 40 §1: the focus rules in the role block (cached), in the UI's language.
       */
      focusPrompt?: boolean;
      /**
       * Spec 40 §2: a message clearly about one job shows the model that job's tools.
       */
      intentNarrowing?: boolean;
      /**
       * Spec 40 §4: big tool results are shown to the model as their key lines, the older
       * answers of a read made again as a pointer to the newest, and command documentation
       * read in an earlier turn as a pointer to read it again (the log keeps them whole).
       */
      toolResultCompression?: boolean;
      /**
       * Spec 40 §3: over budget, the older history is summarized keeping its topics
       * (instead of the oldest messages being dropped).
       */
      topicCompaction?: boolean;
      /**
       * Spec 40 §5: a note when the person switched topics.
       */
      topicMarker?: boolean;
      /**
       * The UI's language (`en`, `zh`): Sextant's own text in a request follows it.
       */
      language?: "en" | "zh";
      /**
       * Tools as a JSON schema the reply must match: `auto` (local servers), `on`, `off`.
       */
      constrainedCalls?: "auto" | "on" | "off";
      /**
       * Tokens of prompt plus reply the model takes.
       */
      contextWindow?: number | null;
      /**
       * The reply cap.
       */
      maxOutputTokens?: number | null;
      /**
       * Tool calls one turn may make.
       */
      maxToolCalls?: number | null;
      /**
       * The provider's API key: null or blank forgets it.
       */
      apiKey?: string | null;
    }
  | {
      op: "listModels";
    }
  | {
      op: "memoryList";
      category?: ("preference" | "correction" | "reference" | "project") | null;
    }
  | {
      op: "memorySearch";
      query: string;
    }
  | {
      op: "memoryAdd";
      /**
       * What kind of fact.
       */
      category: "preference" | "correction" | "reference" | "project";
      text: string;
      /**
       * The chat of the proposal this answers.
       */
      chat?: number | null;
      /**
       * The proposal this answers (`call:<id>`, `seq:<n>`, `msg:<n>`).
       */
      about?: string | null;
    }
  | {
      op: "memoryEdit";
      fact: number;
      text: string;
    }
  | {
      op: "memoryDelete";
      fact: number;
    }
  | {
      op: "memoryDismiss";
      chat: number;
      about: string;
    }
  | {
      op: "memoryClear";
      confirmed: boolean;
    }
  | {
      op: "health";
    };
/**
 * Which wire format the provider speaks.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ProviderKind".
 */
export type ProviderKind = "anthropic" | "openai-compatible";
/**
 * The language of the text Sextant itself puts in a request (the UI's language).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Language".
 */
export type Language = "en" | "zh";
/**
 * Whether tools are offered as a JSON schema the reply must match (spec: weak model
 * first). `Auto`: on for a local OpenAI-compatible server whose model the capability
 * table says to constrain (and for unknown local models), off for cloud providers.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ConstrainedCalls".
 */
export type ConstrainedCalls = "auto" | "on" | "off";
/**
 * Where a [`SecretStore`] keeps its secrets. Serialized as `"keyring"` or
 * `"encryptedFile"`, so a UI can tell the user how their keys are stored.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Backend".
 */
export type Backend = "keyring" | "encryptedFile";
/**
 * Where a limit's value came from, for the settings to say.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "LimitOrigin".
 */
export type LimitOrigin = "you" | "serverRefused" | "llamaCpp" | "ollama" | "vllm" | "lmStudio" | "table";
/**
 * One element of the chat as the UI draws it (`docs/ui-protocol.md`).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "UiItem".
 */
export type UiItem =
  | {
      type: "user";
      seq: number;
      text: string;
    }
  | {
      type: "assistant";
      seq: number;
      text: string;
    }
  | {
      type: "toolCard";
      seq: number;
      id: string;
      name: string;
      args: unknown;
      status: ToolStatus;
      result: string | null;
    }
  | {
      type: "compaction";
      seq: number;
      through: number;
      summary: string;
    }
  | {
      type: "citation";
      seq: number;
      by: string;
      sources: unknown;
    }
  | {
      type: "notice";
      seq: number;
      kind: string;
      payload: unknown;
    };
/**
 * A tool card's state in the UI.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ToolStatus".
 */
export type ToolStatus = ("pending" | "ok" | "error" | "denied") | "blocked" | "interrupted";
/**
 * What happened. Mirrors [`TurnEvent`] plus the approval prompts.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ServiceEventKind".
 */
export type ServiceEventKind =
  | {
      type: "textDelta";
      text: string;
      /**
       * Where it starts in the turn's streamed text (UTF-16 code units), so a page that
       * read the history mid-reply can skip what that already had.
       */
      at: number;
    }
  | {
      type: "toolCallStarted";
      id: string;
      name: string;
    }
  | {
      type: "toolCallPending";
      id: string;
      name: string;
      args: unknown;
    }
  | {
      type: "toolCallRunning";
      id: string;
    }
  | {
      type: "toolCallDone";
      id: string;
      status: ResultStatus;
      content: string;
    }
  | {
      type: "usage";
      inputTokens: number;
      outputTokens: number;
      cacheReadTokens: number;
      cacheCreationTokens: number;
      /**
       * The output count is an estimate (a stopped reply).
       */
      estimated: boolean;
    }
  | {
      type: "waiting";
      seconds: number;
    }
  | {
      type: "approvalRequested";
      callId: string;
      name: string;
      args: unknown;
      tier: Tier | null;
      /**
       * What this very call does that needs a person's yes beyond its tier (it runs a
       * program, writes outside the user's folders, sends to a device), as data the UI
       * words in the person's language.
       */
      question?: Question | null;
    }
  | {
      type: "approvalResolved";
      callId: string;
      approved: boolean;
      by: Decider;
      /**
       * A denial's reason, as the model reads it.
       */
      reason: string | null;
    }
  | {
      type: "turnEnded";
      end: TurnEndKind;
      /**
       * The stop reason, the call limit or the failure, as text.
       */
      detail: string | null;
    };
/**
 * How a call ended, as the model and the UI see it.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ResultStatus".
 */
export type ResultStatus = "ok" | "error" | "denied" | "blocked";
/**
 * Who or what closed an approval prompt. Recorded in the chat log with the decision
 * (a structural `approval` event), so a chat shows afterwards who let each edit through.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Decider".
 */
export type Decider = "person" | "approveAll" | "timeout" | "cancelled" | "turnEnded";
/**
 * What ended a turn (`turnEnded.end`).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TurnEndKind".
 */
export type TurnEndKind = "finished" | "toolCallLimit" | "cancelled" | "failed";
/**
 * One event of one chat, as doors forward it.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ServiceEvent".
 */
export type ServiceEvent = {
  chat: number;
} & ServiceEvent1;
export type ServiceEvent1 =
  | {
      type: "textDelta";
      text: string;
      /**
       * Where it starts in the turn's streamed text (UTF-16 code units), so a page that
       * read the history mid-reply can skip what that already had.
       */
      at: number;
    }
  | {
      type: "toolCallStarted";
      id: string;
      name: string;
    }
  | {
      type: "toolCallPending";
      id: string;
      name: string;
      args: unknown;
    }
  | {
      type: "toolCallRunning";
      id: string;
    }
  | {
      type: "toolCallDone";
      id: string;
      status: ResultStatus;
      content: string;
    }
  | {
      type: "usage";
      inputTokens: number;
      outputTokens: number;
      cacheReadTokens: number;
      cacheCreationTokens: number;
      /**
       * The output count is an estimate (a stopped reply).
       */
      estimated: boolean;
    }
  | {
      type: "waiting";
      seconds: number;
    }
  | {
      type: "approvalRequested";
      callId: string;
      name: string;
      args: unknown;
      tier: Tier | null;
      /**
       * What this very call does that needs a person's yes beyond its tier (it runs a
       * program, writes outside the user's folders, sends to a device), as data the UI
       * words in the person's language.
       */
      question?: Question | null;
    }
  | {
      type: "approvalResolved";
      callId: string;
      approved: boolean;
      by: Decider;
      /**
       * A denial's reason, as the model reads it.
       */
      reason: string | null;
    }
  | {
      type: "turnEnded";
      end: TurnEndKind;
      /**
       * The stop reason, the call limit or the failure, as text.
       */
      detail: string | null;
    };
/**
 * Whether the model still sees an event (spec 30, A2).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Surface".
 */
export type Surface = "current" | "shadowed" | "log_only";
/**
 * Which chats a search may see.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Visibility".
 */
export type Visibility =
  | {
      scope: "all";
    }
  | {
      scope: "project";
      project: string | null;
    };
/**
 * What kind of fact.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Category".
 */
export type Category = "preference" | "correction" | "reference" | "project";
/**
 * The embedders Sextant has.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "EmbedderKind".
 */
export type EmbedderKind = "lexicon" | "minilm" | "endpoint";
/**
 * Why retrieval fell back to the lexicon embedder.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Fallback".
 */
export type Fallback = "modelNotFound" | "modelFailedToLoad";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "BreakerState".
 */
export type BreakerState = "closed" | "open" | "halfOpen";
/**
 * Where the neural model may be, in the order Sextant looks.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ModelPlace".
 */
export type ModelPlace = "commandLine" | "environment" | "userModels" | "appData" | "installed";
/**
 * The kinds of [`WriteProblem`] a person does something different about.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "WriteProblemKind".
 */
export type WriteProblemKind = "diskFull" | "denied" | "other";
/**
 * What a person's door asks of the credentials.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CredentialsRequest".
 */
export type CredentialsRequest =
  | {
      op: "status";
      target: CredentialTarget;
    }
  | {
      op: "set";
      target: CredentialTarget;
      destination: Destination;
      password: string | null;
      caPem: string | null;
      clientCertPem: string | null;
      clientKeyPem: string | null;
      clear: CredentialPart[];
    }
  | {
      op: "forget";
      target: CredentialTarget;
    };
/**
 * What credentials are for: a source of the project, or the project's MQTT publisher.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CredentialTarget".
 */
export type CredentialTarget =
  | {
      kind: "source";
      id: string;
    }
  | {
      kind: "publisher";
    }
  | {
      kind: "postgres";
    };
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Protocol".
 */
export type Protocol = "mqtt" | "tcp" | "postgres";
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CredentialPart".
 */
export type CredentialPart = "password" | "caCertificate" | "clientCertificate" | "clientKey";
/**
 * How much an unmapped setting matters to the person who imported the file.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ReportSeverity".
 */
export type ReportSeverity = "lost" | "changed" | "note";

/**
 * Generated from Sextant's Rust types by crates/api/tests/wire.rs; do not edit.
 */
export interface Wire {
  project: Project;
  tier: Tier;
  errorCode: ErrorCode;
  commandError: CommandError;
  chatRequest: ChatRequest;
  chatListEntry: ChatListEntry;
  chatSettings: SettingsView;
  modelEntry: ModelEntry;
  chatHistory: HistoryReply;
  chatEvent: ServiceEvent;
  archiveSearchRequest: SearchRequest;
  archiveSearchPage: SearchPage;
  archiveHitRef: HitRef;
  archiveCited: Cited;
  memoryFact: Fact;
  memoryWritten: Written;
  retrievalHealth: Health;
  session: SessionSummary;
  writerReport: WriterReport;
  ioStatus: IoStatus;
  dashboardView: DashboardView;
  displayOptions: DisplayOptions;
  mechanisms: Mechanisms;
  credentialsRequest: CredentialsRequest;
  credentialStatus: CredentialStatus;
  importReportLine: ImportReportLine;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Project".
 */
export interface Project {
  format: FileFormat & string;
  /**
   * Version of this file format; see `SCHEMA_VERSION`.
   */
  schemaVersion: number;
  title: string;
  /**
   * Every device the project reads; they run at once.
   */
  sources: Source[];
  groups: Group[];
  actions: Action[];
  workspaces: Workspace[];
  /**
   * Shared constant tables readable from scripts with `tableGet`.
   */
  tables: ConstTable[];
  mqttPublisher: MqttPublisher | null;
  /**
   * Every frame also written to a PostgreSQL (or TimescaleDB) table.
   */
  postgres: PostgresSink | null;
  [k: string]: unknown;
}
/**
 * One device and how its bytes become values.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Source".
 */
export interface Source {
  id: string;
  title: string;
  connection: Connection & {
    [k: string]: unknown;
  };
  framing: Framing & {
    [k: string]: unknown;
  };
  decoder: Decoder & string;
  parser: ParserConfig & {
    [k: string]: unknown;
  };
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SerialSettings".
 */
export interface SerialSettings {
  port: string;
  /**
   * Any rate up to 15 Mbaud; a rate the port cannot do fails the open, never falls back.
   */
  baud: number;
  dataBits: number;
  parity: Parity & string;
  stopBits: StopBits & string;
  flowControl: FlowControl & string;
  dtr: boolean;
  rts: boolean;
  autoReconnect: boolean;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "MqttSettings".
 */
export interface MqttSettings {
  host: string;
  port: number;
  clientId: string;
  /**
   * User name only; the password is a secret kept outside the project.
   */
  username: string | null;
  topic: string;
  version: MqttVersion & string;
  keepAliveS: number;
  cleanSession: boolean;
  tls: boolean;
  /**
   * PEM file of the certificate authority to trust for TLS (a private broker's CA);
   * the system's roots are used when absent.
   */
  caFile: string | null;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CanSettings".
 */
export interface CanSettings {
  /**
   * SocketCAN interface (`can0`, `vcan0`) or a serial port for an SLCAN adapter.
   */
  interface: string;
  slcan: boolean;
  bitrate: number;
  fd: boolean;
  dataBitrate: number | null;
  listenOnly: boolean;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ModbusSettings".
 */
export interface ModbusSettings {
  /**
   * `tcp` uses host/port; `rtu` uses the serial settings.
   */
  rtu: boolean;
  host: string;
  port: number;
  serial: SerialSettings | null;
  slaveId: number;
  pollIntervalMs: number;
  groups: RegisterGroup[];
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "RegisterGroup".
 */
export interface RegisterGroup {
  kind: RegisterKind;
  start: number;
  count: number;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "BleSettings".
 */
export interface BleSettings {
  /**
   * Device name or address to connect to.
   */
  device: string;
  service: string;
  notifyCharacteristic: string;
  writeCharacteristic: string | null;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SimulatorSettings".
 */
export interface SimulatorSettings {
  frameRateHz: number;
  channels: SimChannel[];
  /**
   * Append a GPS track (lat, lon, alt) to every frame.
   */
  gps: boolean;
  /**
   * Append an IMU (ax, ay, az, gx, gy, gz) to every frame.
   */
  imu: boolean;
  seed: number;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SimChannel".
 */
export interface SimChannel {
  name: string;
  waveform: Waveform & string;
  frequencyHz: number;
  amplitude: number;
  offset: number;
  /**
   * Peak-to-peak amplitude of added uniform noise.
   */
  noise: number;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Framing".
 */
export interface Framing {
  mode: FrameMode & string;
  delimiterFormat: DelimiterFormat & string;
  start: string;
  /**
   * Up to 8 alternative end patterns; the earliest match in the stream wins.
   */
  end: string[];
  checksum: ChecksumKind & string;
  /**
   * Longest frame kept; longer ones are discarded and counted.
   */
  maxFrameBytes: number;
}
/**
 * One field of a binary layout. Without `offset` a field starts where the previous ended.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "BinaryField".
 */
export interface BinaryField {
  type: BinaryType;
  endian: Endian & string;
  offset: number | null;
  /**
   * Multiplier applied to the raw integer (1 when absent).
   */
  scale: number | null;
}
/**
 * One CAN message of a [`ParserConfig::Can`] layout.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CanMessage".
 */
export interface CanMessage {
  /**
   * The CAN id, without any flag.
   */
  id: number;
  /**
   * A 29-bit extended id rather than an 11-bit standard one.
   */
  extended: boolean;
  name: string;
  signals: CanSignal[];
}
/**
 * One signal of a CAN message: `physical = raw * factor + offset`.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CanSignal".
 */
export interface CanSignal {
  name: string;
  /**
   * DBC bit numbering: for `little` (Intel) the least significant bit, for `big`
   * (Motorola) the most significant bit, counting bit 0 as the LSB of byte 0.
   */
  startBit: number;
  /**
   * Bits, 1 to 64.
   */
  size: number;
  byteOrder: Endian & string;
  valueType: CanValueType & string;
  factor: number;
  offset: number;
  /**
   * Present only when a multiplexor (switch) signal has one of the given raw values.
   */
  mux?: CanMux | null;
}
/**
 * The multiplexing condition of a signal.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CanMux".
 */
export interface CanMux {
  /**
   * Name of the switch signal in the same message (itself possibly multiplexed).
   */
  switch: string;
  /**
   * Inclusive `[min, max]` ranges of the switch's raw value; `[[3, 3]]` for `m3`.
   */
  ranges: [number, number][];
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Group".
 */
export interface Group {
  id: string;
  title: string;
  widget: GroupWidget & string;
  datasets: Dataset[];
  /**
   * What an `output` group shows: buttons, toggles, sliders, knobs and text fields that
   * send to a device.
   */
  controls?: Control[];
  /**
   * How an `image` group finds pictures in its source's bytes (absent: by their magic
   * bytes, in the first source).
   */
  image?: ImageStream | null;
  /**
   * A `painter` group's JavaScript: `paint(ctx, datasets, w, h)` draws the group on a
   * canvas each frame (Serial Studio's `paint(ctx, w, h)` with a global `datasets` runs
   * too), `onFrame()` runs before it when defined. It runs in the page, in a worker of its
   * own with no network, no DOM and a time budget.
   */
  painterCode?: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Dataset".
 */
export interface Dataset {
  /**
   * Stable unique id; never reused within a project.
   */
  id: string;
  title: string;
  units: string;
  /**
   * 1-based parser slot this dataset reads; ignored for virtual datasets.
   */
  index: number;
  /**
   * The source whose parser feeds this dataset; the first source when absent.
   */
  source: string | null;
  /**
   * Computed by its transform from other datasets and tables, not read from a slot.
   */
  virtual: boolean;
  widget: DatasetWidget & string;
  role: Role | null;
  graph: boolean;
  fft: boolean;
  fftSamples: number;
  led: boolean;
  ledThreshold: number | null;
  /**
   * Its plot has a logarithmic y axis (Serial Studio's `log`).
   */
  log: boolean;
  min: number | null;
  max: number | null;
  alarms: AlarmBand[];
  transform: Transform | null;
  xAxis: XAxis & {
    [k: string]: unknown;
  };
  interpolation?: Interpolation;
  /**
   * Its plot shows a window aligned on an edge, like an oscilloscope's trigger.
   */
  trigger?: Trigger | null;
  /**
   * Its plot keeps the highest and lowest values seen (since switched on or reset).
   */
  peakHold?: boolean;
  /**
   * A waterfall view: its spectrum (of `fftSamples` samples) row after row.
   */
  waterfall?: Waterfall | null;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "AlarmBand".
 */
export interface AlarmBand {
  min: number;
  max: number;
  severity: Severity;
  label: string;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Transform".
 */
export interface Transform {
  language: TransformLanguage;
  code: string;
}
/**
 * An oscilloscope trigger on a time plot.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Trigger".
 */
export interface Trigger {
  /**
   * The dataset whose edge triggers; the plotted one when absent.
   */
  dataset?: string | null;
  edge: TriggerEdge & string;
  /**
   * The value the edge crosses.
   */
  level: number;
  /**
   * How much of the window lies before the edge, from 0 to 1.
   */
  preTrigger: number;
  mode: TriggerMode & string;
}
/**
 * A waterfall (spectrogram): the newest spectrum on top, older ones scrolling down.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Waterfall".
 */
export interface Waterfall {
  colormap: Colormap & string;
  /**
   * How many spectra (rows) it keeps, one per drawn frame: 16 to 2048.
   */
  history: number;
}
/**
 * One output control: what a person sets, and the script that turns it into bytes.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Control".
 */
export interface Control {
  id: string;
  title: string;
  kind: ControlKind & string;
  /**
   * Source id the bytes go to; the first source when absent.
   */
  source?: string | null;
  /**
   * The range and step of a slider or knob.
   */
  min: number;
  max: number;
  step: number;
  /**
   * The value a slider, knob or toggle starts at.
   */
  initial: number;
  /**
   * What a toggle says when on and when off (absent: "On" and "Off" in the person's
   * language).
   */
  onLabel?: string | null;
  offLabel?: string | null;
  /**
   * JavaScript defining `transmit(value)`, which returns the string of bytes to send:
   * value is 1 for a button, 0 or 1 for a toggle, a number for a slider or knob, the
   * text for a text field.
   */
  transmit: string;
  [k: string]: unknown;
}
/**
 * Where an image view's pictures come from: JPEG, PNG or WebP files cut out of a source's
 * raw bytes, between whatever else the device sends.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ImageStream".
 */
export interface ImageStream {
  /**
   * Source id; the first source when absent.
   */
  source?: string | null;
  detection: ImageDetection & string;
  /**
   * With `markers`: the hex bytes an image starts with, e.g. "FF D8".
   */
  start?: string;
  /**
   * With `markers`: the hex bytes an image ends with, e.g. "FF D9".
   */
  end?: string;
  [k: string]: unknown;
}
/**
 * A button that sends fixed bytes to a source, on the dashboard and in the project.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Action".
 */
export interface Action {
  id: string;
  title: string;
  source: string | null;
  payload: string;
  /**
   * `payload` is hex bytes rather than text.
   */
  hex: boolean;
  lineEnding: LineEnding & string;
  /**
   * The timer's interval: the action sends every N ms once its timer runs (when
   * [`Action::timer`] says). Absent: no timer, a click sends once.
   */
  timerMs: number | null;
  timer?: ActionTimer & {
    [k: string]: unknown;
  };
  /**
   * How many times a `repeat` timer sends per click; absent: 3, as Serial Studio.
   */
  repeatCount?: number | null;
  /**
   * Send once each time the source connects (a device that must be woken or told to
   * stream), before any timer's first send.
   */
  onConnect: boolean;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Workspace".
 */
export interface Workspace {
  id: string;
  title: string;
  tiles: Tile[];
  [k: string]: unknown;
}
/**
 * A widget placed on a workspace grid; it shows a group or a single dataset.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Tile".
 */
export interface Tile {
  group: string | null;
  dataset: string | null;
  /**
   * Which of a dataset's views the tile shows; absent: the dataset's first view.
   */
  view?: TileView | null;
  x: number;
  y: number;
  w: number;
  h: number;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ConstTable".
 */
export interface ConstTable {
  name: string;
  entries: TableEntry[];
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "TableEntry".
 */
export interface TableEntry {
  name: string;
  value: TableValue;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "MqttPublisher".
 */
export interface MqttPublisher {
  enabled: boolean;
  host: string;
  port: number;
  topic: string;
  format: PublishFormat & string;
  rateHz: number;
  tls: boolean;
  clientId: string;
  username: string | null;
}
/**
 * Where the PostgreSQL sink writes: one row per value, `(time, bench, dataset, value,
 * text)`, into `table` (created when missing; a TimescaleDB hypertable when the extension
 * is installed). The password stays in the keyring, never in the project.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "PostgresSink".
 */
export interface PostgresSink {
  enabled: boolean;
  host: string;
  port: number;
  database: string;
  user: string;
  /**
   * `table` or `schema.table`: letters, digits and `_`, at most 63 characters each.
   */
  table: string;
  /**
   * The `bench` column of every row, telling many benches apart in one table; the
   * project's title when empty.
   */
  bench: string;
  tls: boolean;
}
/**
 * A failed command: a code, a human message, and for invalid parameters the JSON path.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CommandError".
 */
export interface CommandError {
  code: ErrorCode;
  message: string;
  /**
   * Path of the offending parameter, e.g. `dataset.alarms[0].min`.
   */
  path?: string | null;
  /**
   * With `needsConfirmation`: the question `message` words in English, as data, so a
   * door can put it to the person in their language.
   */
  question?: Question | null;
}
/**
 * One chat of `list`.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ChatListEntry".
 */
export interface ChatListEntry {
  id: number;
  title: string;
  createdUnixMs: number;
  /**
   * The project file the chat was started in (`None`: no saved project).
   */
  project: string | null;
  /**
   * The last event's time (the creation time for an empty chat).
   */
  updatedUnixMs: number;
  events: number;
  /**
   * A turn is running in it now.
   */
  running: boolean;
}
/**
 * What `getSettings` and `setSettings` answer: the stored settings, and where the key is
 * (never the key itself).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SettingsView".
 */
export interface SettingsView {
  provider: ProviderKind & string;
  baseUrl: string;
  model: string;
  autoApproveEdits: boolean;
  allowDeviceControl: boolean;
  /**
   * Spec 20 §2: the remembered facts go with every request (when there is a store),
   * after the cache breakpoint, in an envelope.
   */
  memory: boolean;
  /**
   * Spec 20 §1: the sentinel instruction in the role block, its strip and its verdicts.
   */
  contextProbe: boolean;
  /**
   * Spec 20 §3: a chat started from another carries that chat's digest.
   */
  handoffSeeding: boolean;
  /**
   * Spec 20 §5: each successful edit is checked by a Safe command, and the outcome is in
   * its result.
   */
  autoVerify: boolean;
  /**
   * Spec 20 §4: a message that names a domain gets its skill loaded by the app.
   */
  skillRouting: boolean;
  /**
   * Spec 30 A2–A3: the model may search and cite this project's chats.
   */
  archiveTools: boolean;
  /**
   * Spec 40 §1: the focus rules in the role block (cached), in the UI's language.
   */
  focusPrompt: boolean;
  /**
   * Spec 40 §2: a message clearly about one job shows the model that job's tools.
   */
  intentNarrowing: boolean;
  /**
   * Spec 40 §4: big tool results are shown to the model as their key lines, the older
   * answers of a read made again as a pointer to the newest, and command documentation
   * read in an earlier turn as a pointer to read it again (the log keeps them whole).
   */
  toolResultCompression: boolean;
  /**
   * Spec 40 §3: over budget, the older history is summarized keeping its topics
   * (instead of the oldest messages being dropped).
   */
  topicCompaction: boolean;
  /**
   * Spec 40 §5: a note when the person switched topics.
   */
  topicMarker: boolean;
  language: Language & string;
  constrainedCalls: ConstrainedCalls & string;
  /**
   * Tokens of prompt plus reply the model takes.
   */
  contextWindow: number | null;
  /**
   * The reply cap.
   */
  maxOutputTokens: number | null;
  /**
   * Tool calls one turn may make.
   */
  maxToolCalls: number | null;
  hasApiKey: boolean;
  keyStorage: Backend;
  effectiveLimits: Limits & {
    [k: string]: unknown;
  };
}
/**
 * The limits a turn is sized by, each with where it came from.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Limits".
 */
export interface Limits {
  contextWindow: Limit;
  maxOutputTokens: Limit;
  maxToolCalls: Limit;
}
/**
 * One limit and where it came from.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Limit".
 */
export interface Limit {
  value: number;
  from: LimitOrigin;
}
/**
 * One model of `listModels`.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ModelEntry".
 */
export interface ModelEntry {
  id: string;
  /**
   * The provider's name for it, where it gives one.
   */
  displayName: string | null;
}
/**
 * What `history` answers.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "HistoryReply".
 */
export interface HistoryReply {
  items: UiItem[];
  running: boolean;
  /**
   * The approval prompts open now (`approvalRequested` events).
   */
  approvals: ServiceEventKind[];
  /**
   * The reply streaming now: its text not yet in `items`, and where the next
   * `textDelta` starts, so the page skips what it has.
   */
  streaming: StreamingText | null;
  /**
   * The context probe's degraded state (spec 20 §1), folded from the log: the banner.
   */
  degraded: Degraded | null;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "StreamingText".
 */
export interface StreamingText {
  text: string;
  /**
   * UTF-16 code units of the turn's text streamed so far.
   */
  end: number;
}
/**
 * A chat's degraded state, folded from its `probe_verdict` events: set by the first
 * degrading verdict, kept until the chat ends (only a new chat clears it), naming the
 * latest failure.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Degraded".
 */
export interface Degraded {
  /**
   * `mutated` or `missing`.
   */
  verdict: string;
  /**
   * The drifted anchor, or `format` / `truncated`.
   */
  drift: string | null;
  /**
   * The verdict's event.
   */
  seq: number;
}
/**
 * One search: the query, its filter, and the cursor of the page before (none: the first).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SearchRequest".
 */
export interface SearchRequest {
  query: string;
  filter: SearchFilter & {
    [k: string]: unknown;
  };
  cursor: string | null;
  /**
   * Hits per page (default 20, at most 100).
   */
  limit: number | null;
}
/**
 * What narrows a search. Every field is optional; empty means no narrowing.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SearchFilter".
 */
export interface SearchFilter {
  /**
   * Surfaces to include; all three when absent.
   */
  surfaces: Surface[] | null;
  /**
   * Event kinds to include (`user_message`, `tool_result`, `checkpoint_created`, …).
   */
  kinds: string[] | null;
  visibility: Visibility & {
    [k: string]: unknown;
  };
  /**
   * Events at or after this time (Unix ms).
   */
  sinceUnixMs: number | null;
  /**
   * Events at or before this time (Unix ms).
   */
  untilUnixMs: number | null;
}
/**
 * A page of hits.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SearchPage".
 */
export interface SearchPage {
  hits: SearchHit[];
  /**
   * The next page's cursor; `None` on the last page.
   */
  nextCursor: string | null;
  /**
   * The index generation the page was read at.
   */
  generation: number;
}
/**
 * One hit, with its provenance.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SearchHit".
 */
export interface SearchHit {
  chat: number;
  chatTitle: string;
  project: string | null;
  seq: number;
  unixMs: number;
  /**
   * The event's stored kind.
   */
  kind: string;
  /**
   * Who it is from: `user`, `assistant`, `tool` (a result) or `app` (Sextant's own
   * records).
   */
  role: string;
  surface: Surface & {
    [k: string]: unknown;
  };
  snippet: SnippetPart[];
}
/**
 * A piece of a snippet: text, and whether it is what matched.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SnippetPart".
 */
export interface SnippetPart {
  text: string;
  hit?: boolean;
}
/**
 * One hit to cite.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "HitRef".
 */
export interface HitRef {
  chat: number;
  seq: number;
}
/**
 * What a citation appended.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Cited".
 */
export interface Cited {
  /**
   * The `citation` event's seq.
   */
  seq: number;
  /**
   * Provenance, one entry per source chat.
   */
  sources: {
    [k: string]: unknown;
  };
  /**
   * The readable message (appended after the citation for a person).
   */
  message: string;
}
/**
 * One fact.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Fact".
 */
export interface Fact {
  id: number;
  category: Category;
  text: string;
  /**
   * The project file it belongs to (project facts only).
   */
  project: string | null;
  createdUnixMs: number;
  lastUsedUnixMs: number;
}
/**
 * What a write did.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Written".
 */
export interface Written {
  fact: Fact;
  /**
   * The fact removed to make room (the least recently used), if one was.
   */
  evicted: Fact | null;
  /**
   * The kinds of secret taken out of the text.
   */
  redacted: string[];
}
/**
 * The health DTO: every enum-keyed map complete, a missing latency `null`.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Health".
 */
export interface Health {
  generatedUnixMs: number;
  /**
   * The embedder answering queries now (`None`: retrieval is off).
   */
  embedder: EmbedderHealth | null;
  scopeCapacity: number;
  scopeTtlMs: number;
  scopesEvicted: number;
  scopesExpired: number;
  /**
   * Per-scope state, most recently used first; scopes are not named.
   */
  scopes: ScopeHealth[];
  process: ProcessHealth & {
    [k: string]: unknown;
  };
}
/**
 * Which embedder answers queries, why it is not the one preferred, and its breaker.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "EmbedderHealth".
 */
export interface EmbedderHealth {
  kind: EmbedderKind;
  /**
   * Why the neural model is not in use (`None`: it is, or none was wanted).
   */
  fallback: Fallback | null;
  dimensions: number;
  breaker: BreakerSnapshot | null;
  /**
   * Every place the neural model was looked for, in order, and whether it was there.
   * The only text in the health snapshot: folders on the person's own computer, shown
   * to them so they can put the model where Sextant looks.
   */
  searched: SearchedPlace[];
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "BreakerSnapshot".
 */
export interface BreakerSnapshot {
  state: BreakerState;
  /**
   * Failures in a row now.
   */
  consecutiveFailures: number;
  failures: number;
  /**
   * Times it opened.
   */
  opens: number;
  /**
   * Queries that skipped the embedder because it was open.
   */
  skips: number;
}
/**
 * One place the neural model was looked for.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SearchedPlace".
 */
export interface SearchedPlace {
  place: ModelPlace;
  path: string;
  /**
   * Every model file is there.
   */
  found: boolean;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ScopeHealth".
 */
export interface ScopeHealth {
  ageMs: number;
  idleMs: number;
  latency: {
    assembly?: Latency;
    authoritative_revalidation?: Latency;
    keyword?: Latency;
    query_embedding?: Latency;
    total?: Latency;
    vector?: Latency;
  };
  purposes: {
    decision?: number;
    injection?: number;
    recall?: number;
    search?: number;
  };
  outcomes: {
    cancelled?: number;
    completed?: number;
    disabled?: number;
    empty_query?: number;
    failed?: number;
  };
  degradations: {
    candidate_budget_exhausted?: number;
    embedding_circuit_open?: number;
    embedding_error?: number;
    embedding_timeout?: number;
    fts_unavailable?: number;
    revision_changed?: number;
    store_error?: number;
    store_timeout?: number;
    store_unusable?: number;
    unknown?: number;
    vector_cold?: number;
  };
}
/**
 * A latency distribution in a snapshot; `None` (shown as "—") when nothing was measured.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Latency".
 */
export interface Latency {
  samples: number;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ProcessHealth".
 */
export interface ProcessHealth {
  outcomes: {
    cancelled?: number;
    completed?: number;
    disabled?: number;
    empty_query?: number;
    failed?: number;
  };
  gauges: ProcessGauges;
}
/**
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ProcessGauges".
 */
export interface ProcessGauges {
  extractionQueueDepth: number;
  extractionOldestAgeMs: number;
  embeddingBacklog: number;
  openStores: number;
  openStoresHighWater: number;
  providerQueued: number;
  providerAdmitted: number;
  providerRateLimited: number;
  providerCapacityRejected: number;
  providerDeadline: number;
  providerAborted: number;
  providerLateSettled: number;
}
/**
 * One session in a list.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SessionSummary".
 */
export interface SessionSummary {
  id: number;
  title: string;
  /**
   * Wall-clock start, milliseconds since the Unix epoch.
   */
  startedUnixMs: number;
  /**
   * Wall-clock end (ms); absent while recording, or when the recording was cut short
   * (a crash): what was committed until then is still there.
   */
  endedUnixMs?: number | null;
  tags: string[];
  /**
   * Raw chunks recorded.
   */
  chunks: number;
  /**
   * Raw bytes recorded.
   */
  bytes: number;
  /**
   * Parsed frames recorded.
   */
  frames: number;
  /**
   * Raw chunks the recorder could not keep up with.
   */
  droppedChunks: number;
  /**
   * Parsed frames the recorder could not keep up with.
   */
  droppedFrames: number;
  /**
   * From the first to the last recorded timestamp, in seconds.
   */
  durationS: number;
}
/**
 * A writer's counts, live or final.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "WriterReport".
 */
export interface WriterReport {
  id: number;
  /**
   * Raw chunks committed.
   */
  chunks: number;
  /**
   * Raw bytes committed.
   */
  bytes: number;
  /**
   * Parsed frames committed.
   */
  frames: number;
  /**
   * Raw chunks lost because the writer could not keep up.
   */
  droppedChunks: number;
  /**
   * Parsed frames lost because the writer could not keep up.
   */
  droppedFrames: number;
  /**
   * Batches that failed to commit (their rows count as dropped).
   */
  errors: number;
  /**
   * Why the recording is not being saved right now (the disk is full…); absent while
   * commits succeed. The person is shown it: recording goes on and resumes saving by
   * itself once the cause is gone.
   */
  problem?: WriteProblem | null;
}
/**
 * Why a write failed, as a person acts on it.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "WriteProblem".
 */
export interface WriteProblem {
  kind: WriteProblemKind;
  /**
   * The system's own words, for a report; the UI words the kind.
   */
  detail: string;
}
/**
 * What `io.status` returns: whether a run is live, and each of its sources.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "IoStatus".
 */
export interface IoStatus {
  /**
   * A run is live (`io.connect`); its sources may still be connecting or failing.
   */
  connected: boolean;
  /**
   * The project's sources in order; empty when not connected.
   */
  sources: SourceStatus[];
  /**
   * The actions whose timer a click started and that still run (their buttons show it).
   */
  runningActions: string[];
  /**
   * The run is a replay that played to its end and holds there (its sources still
   * answer, to be sought in): a person reads "replay ended", not "connected".
   */
  replayEnded: boolean;
  /**
   * The project's PostgreSQL sink in this run; absent when it has none.
   */
  postgres?: PostgresStatus | null;
}
/**
 * One source of a live run: its status and counters since it started.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "SourceStatus".
 */
export interface SourceStatus {
  /**
   * The source's id in the project.
   */
  id: string;
  /**
   * `connecting`, `connected`, `reconnecting (attempt N, next try in S s): reason`,
   * `error: reason`, `finished` or `closed`.
   */
  status: string;
  /**
   * Bytes read from the device.
   */
  bytes: number;
  /**
   * Reads from the device.
   */
  chunks: number;
  /**
   * Reads thrown away because the pipeline's queue was full.
   */
  droppedChunks: number;
  /**
   * Frames cut from the bytes whose checksum (if any) passed.
   */
  frames: number;
  /**
   * Frames whose checksum did not match.
   */
  checksumFailed: number;
  /**
   * Frames dropped for being longer than the framing allows.
   */
  oversizeDropped: number;
  /**
   * Frames the decoder (bad COBS/SLIP) or the parser rejected.
   */
  parseErrors: number;
  /**
   * The most recent decode or parse error; absent when there was none.
   */
  lastError?: string | null;
}
/**
 * The PostgreSQL sink of a live run: what went in, what was lost, and why not now.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "PostgresStatus".
 */
export interface PostgresStatus {
  /**
   * A connection to the server is up.
   */
  connected: boolean;
  /**
   * Frames, and values (rows), in the table.
   */
  writtenFrames: number;
  writtenRows: number;
  /**
   * Frames lost: the queue was full while the server was slow or away, or it refused them.
   */
  droppedFrames: number;
  /**
   * Why values are not going in right now; absent while they are.
   */
  problem?: string | null;
}
/**
 * How the dashboard shows data: view state, not project data (it is not saved).
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "DashboardView".
 */
export interface DashboardView {
  /**
   * Seconds of history on time plots.
   */
  timeRangeS: number;
  /**
   * Points per plot after decimation.
   */
  points: number;
  /**
   * Frozen: `dashboard.*` reads return the frame at which the view was paused.
   */
  paused: boolean;
  /**
   * Display refresh rate (1 to 240 Hz).
   */
  refreshHz: number;
}
/**
 * What a subscriber wants drawn; see `docs/ui-protocol.md`.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "DisplayOptions".
 */
export interface DisplayOptions {
  /**
   * Display ticks per second, [`MIN_RATE_HZ`] to [`MAX_RATE_HZ`]: the display rate,
   * `refreshHz` end to end (the UI setting, `dashboard.setView`, the project). `rateHz`,
   * its earlier name, is still read, so an older UI keeps working.
   */
  refreshHz: number;
  /**
   * Points per dataset window after min/max decimation (2 to 100000).
   */
  points: number;
  /**
   * Visible window in seconds.
   */
  timeRangeS: number;
  /**
   * Dataset index → how many newest samples to send undecimated too.
   */
  raw: {
    /**
     * This interface was referenced by `undefined`'s JSON-Schema definition
     * via the `patternProperty` "^\d+$".
     */
    [k: string]: number;
  };
  /**
   * Dataset index → the most window points to send for it, below `points`: a plot
   * needs no more than about two per pixel of its width, whatever `points` says, and a
   * dataset no plot draws needs none (0: only its newest value). Datasets not listed
   * get `points`.
   */
  windows: {
    /**
     * This interface was referenced by `undefined`'s JSON-Schema definition
     * via the `patternProperty` "^\d+$".
     */
    [k: string]: number;
  };
  /**
   * Whether to send the console's bytes: only a page showing a console needs them, and a
   * fast text device sends megabytes a second. Turned on later, the bytes still kept
   * (up to [`CONSOLE_BYTES`]) arrive first.
   */
  console: boolean;
}
/**
 * The assistant's mechanisms, each its own persisted setting (spec 20, "Settings"), all on
 * by default. Off means absent: a mechanism that is off is not built for the turn and adds
 * zero bytes to its requests.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Mechanisms".
 */
export interface Mechanisms {
  /**
   * Spec 20 §2: the remembered facts go with every request (when there is a store),
   * after the cache breakpoint, in an envelope.
   */
  memory: boolean;
  /**
   * Spec 20 §1: the sentinel instruction in the role block, its strip and its verdicts.
   */
  contextProbe: boolean;
  /**
   * Spec 20 §3: a chat started from another carries that chat's digest.
   */
  handoffSeeding: boolean;
  /**
   * Spec 20 §5: each successful edit is checked by a Safe command, and the outcome is in
   * its result.
   */
  autoVerify: boolean;
  /**
   * Spec 20 §4: a message that names a domain gets its skill loaded by the app.
   */
  skillRouting: boolean;
  /**
   * Spec 30 A2–A3: the model may search and cite this project's chats.
   */
  archiveTools: boolean;
  /**
   * Spec 40 §1: the focus rules in the role block (cached), in the UI's language.
   */
  focusPrompt: boolean;
  /**
   * Spec 40 §2: a message clearly about one job shows the model that job's tools.
   */
  intentNarrowing: boolean;
  /**
   * Spec 40 §4: big tool results are shown to the model as their key lines, the older
   * answers of a read made again as a pointer to the newest, and command documentation
   * read in an earlier turn as a pointer to read it again (the log keeps them whole).
   */
  toolResultCompression: boolean;
  /**
   * Spec 40 §3: over budget, the older history is summarized keeping its topics
   * (instead of the oldest messages being dropped).
   */
  topicCompaction: boolean;
  /**
   * Spec 40 §5: a note when the person switched topics.
   */
  topicMarker: boolean;
}
/**
 * Where credentials were given for; they go nowhere else.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "Destination".
 */
export interface Destination {
  protocol: Protocol;
  host: string;
  port: number;
  tls: boolean;
}
/**
 * What the door answers: which parts are saved – never a value.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "CredentialStatus".
 */
export interface CredentialStatus {
  password: boolean;
  caCertificate: boolean;
  clientCertificate: boolean;
  clientKey: boolean;
  /**
   * The destination they were saved for; null when nothing is saved.
   */
  savedFor: Destination | null;
  /**
   * Where they are kept.
   */
  store: Backend | null;
}
/**
 * A line of the report as a person reads it.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ImportReportLine".
 */
export interface ImportReportLine {
  severity: ReportSeverity;
  subject: ReportSubject;
  message: string;
  /**
   * Where in the file (the first, for a folded line).
   */
  path: string;
  /**
   * How many settings the line stands for (display details of many datasets fold into
   * one line).
   */
  count: number;
}
/**
 * What a report item is about, by the name the person gave it.
 *
 * This interface was referenced by `Wire`'s JSON-Schema
 * via the `definition` "ReportSubject".
 */
export interface ReportSubject {
  /**
   * `group`, `dataset`, `source`, `action`, `table`, `workspace` or `project`.
   */
  kind: string;
  /**
   * `VU Meter`, `VU Meter/Mic L`; empty for the project.
   */
  name: string;
}
