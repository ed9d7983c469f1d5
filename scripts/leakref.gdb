# leakref.gdb — a `leakref` command for gdb, written in gdb's own command
# language (no Python). Load it with:  (gdb) source /usr/local/share/leakref/leakref.gdb
#
#   (gdb) leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
#   (gdb) leakref info
#
# It snapshots the current inferior with `gcore` (the inferior only pauses
# while the core is written), runs the leakref CLI on the snapshot, and
# deletes it. Set LEAKREF_GDB_DIR to keep snapshots elsewhere; the `leakref`
# binary is taken from PATH.

define leakref
  shell mkdir -p /tmp/leakref-gdb "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}"
  gcore /tmp/leakref-gdb/snapshot.core
  shell [ -z "$LEAKREF_GDB_DIR" ] || mv -f /tmp/leakref-gdb/snapshot.core "$LEAKREF_GDB_DIR/snapshot.core"
  if $argc == 0
    shell leakref info "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core"
  end
  if $argc == 1
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core"
  end
  if $argc == 2
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1
  end
  if $argc == 3
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2
  end
  if $argc == 4
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3
  end
  if $argc == 5
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4
  end
  if $argc == 6
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5
  end
  if $argc == 7
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6
  end
  if $argc == 8
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7
  end
  if $argc == 9
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8
  end
  if $argc == 10
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9
  end
  if $argc == 11
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10
  end
  if $argc == 12
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10 $arg11
  end
  if $argc == 13
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10 $arg11 $arg12
  end
  if $argc == 14
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10 $arg11 $arg12 $arg13
  end
  if $argc == 15
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10 $arg11 $arg12 $arg13 $arg14
  end
  if $argc == 16
    shell leakref $arg0 "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core" $arg1 $arg2 $arg3 $arg4 $arg5 $arg6 $arg7 $arg8 $arg9 $arg10 $arg11 $arg12 $arg13 $arg14 $arg15
  end
  shell rm -f "${LEAKREF_GDB_DIR:-/tmp/leakref-gdb}/snapshot.core"
end
document leakref
Snapshot the inferior with gcore and run the leakref CLI on the snapshot.
Usage: leakref SUBCOMMAND [ARGS...]   (up to 15 arguments; default: info)
Example: leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
end
