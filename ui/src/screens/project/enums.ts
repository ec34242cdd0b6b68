/** Enumerations of the project model (docs/project.schema.json), for the editor's selects,
 *  in the order they are offered. The widget lists are typed against the wire types and a
 *  test (widgets-registry.test.ts) checks they are exactly the generated schema's enums. */
import type { DatasetWidget, GroupWidget } from "../../lib/model";
import type { ActionTimer, Colormap, ControlKind } from "../../lib/wire/types.gen";

export const GROUP_WIDGETS = ["none", "dataGrid", "multiPlot", "accelerometer", "gyroscope", "gps", "plot3d", "barPanel", "ledPanel", "terminal", "painter", "image", "webView", "output"] as const satisfies readonly GroupWidget[];
export const DATASET_WIDGETS = ["none", "bar", "gauge", "compass", "meter", "clock"] as const satisfies readonly DatasetWidget[];
/** An output control's kinds, every one the model has. */
export const CONTROL_KINDS = ["button", "toggle", "slider", "knob", "textField"] as const satisfies readonly ControlKind[];
/** A waterfall's colormaps, every one the model has. */
export const COLORMAPS = ["viridis", "inferno", "turbo", "gray"] as const satisfies readonly Colormap[];
export const ROLES = ["lat", "lon", "alt", "x", "y", "z", "yaw", "pitch", "roll"] as const;
export const SEVERITIES = ["info", "warning", "critical"] as const;
export const TRANSFORM_LANGUAGES = ["expression", "lua", "javascript"] as const;
export const LINE_ENDINGS = ["none", "lf", "cr", "crLf"] as const;
/** When an action's timer runs; every one the model has, so none can be missing. */
export const ACTION_TIMERS = ["whileConnected", "startOnClick", "toggleOnClick", "repeat"] as const satisfies readonly ActionTimer[];
const everyTimer: Record<ActionTimer, true> = { whileConnected: true, startOnClick: true, toggleOnClick: true, repeat: true };
void everyTimer;
export const FRAME_MODES = ["endOnly", "startEnd", "startOnly", "none"] as const;
export const DELIMITER_FORMATS = ["text", "hex"] as const;
export const CHECKSUMS = ["none", "xor8", "mod256", "crc8", "crc16", "crc16-modbus", "crc16-ccitt", "fletcher16", "crc32", "adler32"] as const;
export const DECODERS = ["plainText", "hex", "base64", "binary", "cobs", "slip"] as const;
export const BINARY_TYPES = ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64"] as const;
