export const strings = {
  en: {
    "nav.connect": "Connect",
    "nav.dashboard": "Dashboard",
    "nav.quickplot": "Quick plot",
    "nav.project": "Project",
    "nav.recording": "Recording",
    "nav.settings": "Settings",
    "status.connected": "Connected",
    "status.disconnected": "Disconnected",
    "status.backendLost": "Connection to Sextant lost – retrying",
  },
  zh: {
    "nav.connect": "连接",
    "nav.dashboard": "仪表盘",
    "nav.quickplot": "快速绘图",
    "nav.project": "项目",
    "nav.recording": "录制",
    "nav.settings": "设置",
    "status.connected": "已连接",
    "status.disconnected": "未连接",
    "status.backendLost": "与 Sextant 的连接已断开，正在重试",
  },
};
