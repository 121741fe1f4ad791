/**
 * When `toycoder-daemon` is not found: offer to install it (run in a terminal, where the person sees
 * it happen and can answer pipx or uv) or to set the path of one installed elsewhere (issue 31).
 */
import * as vscode from 'vscode';

export const INSTALL_COMMANDS = {
  'Install with pipx': 'pipx install toycoder-daemon',
  'Install with uv': 'uv tool install toycoder-daemon',
} as const;

/** Ask what to do; returns what was done (for the log and tests). */
export async function offerInstall(exe: string): Promise<string | undefined> {
  const pick = await vscode.window.showErrorMessage(
    `ToyCoder: the daemon "${exe}" was not found. Install it, or set the path of the one you have.`,
    ...Object.keys(INSTALL_COMMANDS), 'Set path');
  if (pick === 'Install with pipx' || pick === 'Install with uv') {
    const terminal = vscode.window.createTerminal('ToyCoder: install');
    terminal.show();
    terminal.sendText(INSTALL_COMMANDS[pick]);
    return INSTALL_COMMANDS[pick];
  }
  if (pick === 'Set path') {
    const path = await vscode.window.showInputBox({
      prompt: 'The toycoder-daemon executable (e.g. ~/.local/bin/toycoder-daemon)', ignoreFocusOut: true,
    });
    if (!path) return undefined;
    await vscode.workspace.getConfiguration('toycoder').update('daemon.command', [path],
      vscode.ConfigurationTarget.Global);
    return `toycoder.daemon.command = ["${path}"]`;
  }
  return undefined;
}
