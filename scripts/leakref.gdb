# leakref.gdb — a `leakref` command for gdb, written in gdb's own command
# language (no Python). Load it with:  (gdb) source /usr/local/share/leakref/leakref.gdb
#
#   (gdb) leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
#   (gdb) leakref info
#
# It snapshots the current inferior with `gcore` (the inferior only pauses
# while the core is written), runs the leakref CLI on the snapshot, and
# deletes it. Any number of arguments, quoted as on a shell command line.
# Nothing runs inside the inferior: a call into it (getpid(), say) makes
# gdb write its registers back, which some kernels refuse ("Couldn't write
# extended state status"), and it would disturb the process.
# Each session takes a slot, /tmp/leakref-gdb.N (N from 1 to 250): mkdir is
# atomic, so two sessions never hold one; the slot records its gdb's pid,
# and a slot whose gdb is gone is taken back (sessions choose one at a time). The snapshot goes into a
# directory of its own under $LEAKREF_GDB_DIR or /tmp, linked from the slot.
# The leakref binary is $LEAKREF, else the one `make install` put beside
# this file (@LEAKREF@), else `leakref` on PATH.

define leakref
  # The slot's number comes back as the shell's exit status ($PPID there is
  # this gdb); 0: every slot is held. An owner that is no pid, or a pid
  # that is gone, frees its slot; an empty one is a session starting. Only
  # this user's slots are taken back, and only a snapshot directory of this
  # user's that mktemp named is removed with one: /tmp is everyone's. The
  # choice is made under a lock on /tmp (flock): between reading a stale
  # owner and removing its slot, another session could have taken the slot
  # back and started in it, and the two would then share one.
  shell exec 9</tmp; flock 9; for n in $(seq 1 250); do s=/tmp/leakref-gdb.$n; o=$(cat "$s/owner" 2>/dev/null); case "$o" in "") g=1;; *[!0-9]*|0*) g=0;; *) kill -0 "$o" 2>/dev/null && g=1 || g=0;; esac; if [ $g = 0 ] && [ -O "$s" ]; then t=$(readlink "$s/snap"); case "$t" in */leakref-gdb-snap.??????) [ -O "$t" ] && rm -rf "$t";; esac; rm -rf "$s"; fi; if mkdir "$s" 2>/dev/null; then echo $PPID > "$s/owner"; d=$(mktemp -d "${LEAKREF_GDB_DIR:-/tmp}/leakref-gdb-snap.XXXXXX") && ln -s "$d" "$s/snap" && : > "$s/args" && exit $n; rm -rf "$s"; exit 0; fi; done; exit 0
  set $lr_slot = $_shell_exitcode
  if $lr_slot == 0
    echo leakref: no free slot /tmp/leakref-gdb.N (1-250) or no snapshot directory\n
  else
    eval "gcore /tmp/leakref-gdb.%d/snap/snapshot.core", $lr_slot
    # One argument per line, as the shell reads what was typed: the
    # subcommand, the snapshot, then the rest.
    if $argc == 0
      eval "shell printf 'info\\n' >> /tmp/leakref-gdb.%d/args", $lr_slot
    else
      eval "shell printf '%%s\\n' $arg0 >> /tmp/leakref-gdb.%d/args", $lr_slot
    end
    eval "shell printf '%%s\\n' /tmp/leakref-gdb.%d/snap/snapshot.core >> /tmp/leakref-gdb.%d/args", $lr_slot, $lr_slot
    set $lr_i = 1
    while $lr_i < $argc
      eval "shell printf '%%s\\n' $arg%d >> /tmp/leakref-gdb.%d/args", $lr_i, $lr_slot
      set $lr_i = $lr_i + 1
    end
    eval "shell L=\"${LEAKREF:-@LEAKREF@}\"; case \"$L\" in @*) L=leakref;; esac; xargs -d '\\n' -a /tmp/leakref-gdb.%d/args \"$L\"", $lr_slot
    eval "shell rm -rf \"$(readlink /tmp/leakref-gdb.%d/snap)\" /tmp/leakref-gdb.%d", $lr_slot, $lr_slot
  end
end
document leakref
Snapshot the inferior with gcore and run the leakref CLI on the snapshot.
Usage: leakref SUBCOMMAND [ARGS...]   (default: info)
Example: leakref walk --type "struct obj" --head obj_list --list-member link --refcount ref
end
