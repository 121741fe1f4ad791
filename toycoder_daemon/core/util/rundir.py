"""The per-user runtime dir (the warm start's fork server, the live stream between daemons) and the
uid at the other end of a unix socket: both ends of anything in it are ours."""

from __future__ import annotations

import _socket as socket  # every launch imports this module: the C module socket.py wraps (warm/launcher.py says why)
import os
import stat
import struct


class RuntimeDirError(OSError):
    """The runtime dir cannot be used (the message names it and says why)."""


def runtime_dir(create: bool = True) -> str:
    """$TOYCODER_RUNTIME_DIR, else $XDG_RUNTIME_DIR/toycoder, else <tempdir>/toycoder-<uid>: created
    0700 when missing; one that exists must be a directory of ours with mode 0700 (it is never
    chmod-ed or chown-ed: we did not create it). Raises RuntimeDirError naming the directory."""
    path = os.environ.get("TOYCODER_RUNTIME_DIR")
    if not path:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        path = os.path.join(xdg, "toycoder") if xdg else os.path.join(os.environ.get("TMPDIR") or "/tmp",
                                                                      f"toycoder-{os.geteuid()}")
    path = os.path.abspath(path)
    if create:
        try:
            os.mkdir(path, 0o700)
            os.chmod(path, 0o700)  # ours: the umask may have taken bits off
        except FileExistsError:
            pass
        except OSError as e:
            raise RuntimeDirError(f"cannot create the runtime dir {path}: {e.strerror or e}") from None
    check_private_dir(path, "runtime dir")
    return path


def check_private_dir(path: str, what: str) -> None:
    """RuntimeDirError unless `path` is a directory (not a link) of ours with mode 0700."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise RuntimeDirError(f"{what} {path}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeDirError(f"{what} {path} is not a directory")
    if st.st_uid != os.geteuid():
        raise RuntimeDirError(f"{what} {path} is owned by uid {st.st_uid}, not {os.geteuid()}")
    if stat.S_IMODE(st.st_mode) != 0o700:
        raise RuntimeDirError(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0700")


def peer(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the other end, from the kernel (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return pid, uid, gid
