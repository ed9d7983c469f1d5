# leakref.gdb — a `leakref` command for gdb, written in gdb's own command
# language (no Python). Load it with:  (gdb) source /usr/local/share/leakref/leakref.gdb
#
#   (gdb) leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
#   (gdb) leakref info
#
# It snapshots the current inferior with `gcore` (the inferior only pauses
# while the core is written), runs the leakref CLI on the snapshot, and
# deletes it. Any number of arguments, quoted as on a shell command line.
# Each session snapshots into its own directory (named by the inferior's
# pid, which only one debugger can hold), under $LEAKREF_GDB_DIR or /tmp.
# The leakref binary is $LEAKREF, else the one `make install` put beside
# this file (@LEAKREF@), else `leakref` on PATH.

define leakref
  # The inferior's pid names this session's files: two gdbs cannot attach
  # to one process, so two sessions never share them.
  set $lr_pid = (int) getpid()
  eval "shell d=$(mktemp -d \"${LEAKREF_GDB_DIR:-/tmp}/leakref-gdb.XXXXXX\") && ln -sfn \"$d\" /tmp/leakref-gdb.%d && : > \"$d/args\"", $lr_pid
  eval "gcore /tmp/leakref-gdb.%d/snapshot.core", $lr_pid
  # One argument per line, as the shell reads what was typed: the
  # subcommand, the snapshot, then the rest.
  if $argc == 0
    eval "shell printf 'info\\n' >> /tmp/leakref-gdb.%d/args", $lr_pid
  else
    eval "shell printf '%%s\\n' $arg0 >> /tmp/leakref-gdb.%d/args", $lr_pid
  end
  eval "shell printf '%%s\\n' /tmp/leakref-gdb.%d/snapshot.core >> /tmp/leakref-gdb.%d/args", $lr_pid, $lr_pid
  set $lr_i = 1
  while $lr_i < $argc
    eval "shell printf '%%s\\n' $arg%d >> /tmp/leakref-gdb.%d/args", $lr_i, $lr_pid
    set $lr_i = $lr_i + 1
  end
  eval "shell L=\"${LEAKREF:-@LEAKREF@}\"; case \"$L\" in @*) L=leakref;; esac; xargs -d '\\n' -a /tmp/leakref-gdb.%d/args \"$L\"", $lr_pid
  eval "shell rm -rf \"$(readlink /tmp/leakref-gdb.%d)\" /tmp/leakref-gdb.%d", $lr_pid, $lr_pid
end
document leakref
Snapshot the inferior with gcore and run the leakref CLI on the snapshot.
Usage: leakref SUBCOMMAND [ARGS...]   (default: info)
Example: leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
end
