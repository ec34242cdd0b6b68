/** Strings of the shell (navigation, connection status, the consent dialog), English and
 *  简体中文 (a test checks both have the same keys). */
const en = {
  "nav.connect": "Connect",
  "nav.dashboard": "Dashboard",
  "nav.quickplot": "Quick plot",
  "nav.project": "Project",
  "nav.recording": "Recording",
  "nav.settings": "Settings",
  "status.connected": "Connected",
  "status.disconnected": "Disconnected",
  "status.partly": "Partly connected",
  "status.connecting": "Connecting…",
  "status.reconnecting": "Reconnecting…",
  "status.error": "Connection failed",
  "status.finished": "Finished",
  "status.backendLost": "Connection to Sextant lost – retrying",
  "consent.allow": "Allow",
  "access.title": "Open Sextant from the address it printed",
  "access.missing":
    "This page was opened without the secret part of its address, so it cannot control Sextant. Open the address Sextant printed when it started – it ends in ?token=…",
  "access.refused":
    "This address is from an earlier start of Sextant: its secret no longer matches. Open the address Sextant printed when it started this time.",
} satisfies Record<string, string>;

export type Key = keyof typeof en;

const zh: Record<Key, string> = {
  "nav.connect": "连接",
  "nav.dashboard": "仪表盘",
  "nav.quickplot": "快速绘图",
  "nav.project": "项目",
  "nav.recording": "录制",
  "nav.settings": "设置",
  "status.connected": "已连接",
  "status.disconnected": "未连接",
  "status.partly": "部分已连接",
  "status.connecting": "正在连接…",
  "status.reconnecting": "正在重新连接…",
  "status.error": "连接失败",
  "status.finished": "已结束",
  "status.backendLost": "与 Sextant 的连接已断开，正在重试",
  "consent.allow": "允许",
  "access.title": "请用 Sextant 启动时打印的地址打开",
  "access.missing": "此页面的地址缺少密钥部分，因此无法控制 Sextant。请打开 Sextant 启动时打印的地址（以 ?token=… 结尾）。",
  "access.refused": "此地址来自 Sextant 的上一次启动，其中的密钥已不再匹配。请打开 Sextant 本次启动时打印的地址。",
};

export const strings = { en, zh };
