/* crash extension shim: registers `leakref`, applies the crash 8.0.2
 * task-table fix when the kernel needs it, and hands the C++ engine a table
 * of callbacks. This is the only file that includes crash's defs.h (which is
 * not valid C++), and nothing here can longjmp through C++ frames: the
 * callbacks use readmem with RETURN_ON_ERROR and never FATAL. */
#include "defs.h"

#include <signal.h>
#include <string.h>

#include "leakref_host.h"

static void cmd_leakref(void);

static char* help_leakref[] = {
    "leakref",
    "refcounts and their holders: walks, inodes, modules, slabs, leaks, invariants",
    "walk|inodes|modules|check|slab|leaks|refs|retained|profile [options] [--json]",
    "  Walks the kernel's own refcounted structures through the vmlinux DWARF,",
    "  with the same engine as the standalone leakref tool (leakref kernel).",
    "  Every walk is bounded and cycle-safe; Ctrl-C and '| head' stop it.",
    " ",
    "  walk --type TYPE --head HEAD (--list-member M | --hlist-member M | --next M |",
    "       --tree-member M | --xarray | --array | --pointer-array) [--refcount FIELD]",
    "       [--show F,..] [--where EXPR] [--group-by FIELD].. [--sort [-]FIELD]",
    "       [--summary] [--summary-first] [--limit N] [--fail-on ...] [--jsonl]",
    "       [--ko FILE]",
    "       Any list_head ring, hlist, NULL-terminated chain, tree, xarray, array",
    "       or hash table. HEAD is written as in gdb: SYMBOL, SYMBOL@module,",
    "       SYMBOL.member, *SYMBOL, &SYMBOL, SYMBOL[3], a->b, *(struct T *)ADDR,",
    "       ADDR, ADDR+OFFSET. TYPE may be a bare name (inode). FIELD may be",
    "       atomic_t, refcount_t, kref, lockref or a plain integer. Prints every",
    "       object, a refcount histogram and (with --group-by) counts per value;",
    "       --summary-first puts them before the rows when there are more than 256.",
    "  inodes [-s SUPER_BLOCK | -t FSTYPE] [--all] [--flagged]",
    "       Every super_block's inodes with i_count, i_nlink and i_state, their",
    "       dentries' d_lockref counts and the open files (f_count) and processes",
    "       that hold them (fd, executable, mapping). A count not explained by",
    "       child dentries, open files, mounts, task root/pwd and the filesystem's",
    "       own pin is flagged '!!'. Without --all only held or flagged inodes",
    "       are listed.",
    "  modules [NAME...]",
    "       Module refcnt and its holders: dependent modules, mounted super",
    "       blocks of the module's filesystems, open files whose f_op it owns.",
    "  check  Runs the invariants (list integrity of tasks, modules, super_blocks",
    "       and s_inodes; f_count, i_count, d_lockref and module refcnt against",
    "       the holders found in memory) and reports violations.",
    "  slab [--cache NAME].. [--objects] [--stacks [--top N]] [--scan-pages]",
    "       [--type TYPE [--where EXPR] [--show F,..] [--refcount F] [--group-by F]]",
    "       SLUB: every cache's slabs and allocated objects (full slabs on no list",
    "       included: found in the struct page array), free objects decoded from",
    "       the freelists. With --cache each allocated object, and with",
    "       slub_debug=U who allocated it; --stacks groups them by allocation",
    "       stack (the stack depot). --type walks the objects like 'walk'.",
    "       Flagged dentries in 'inodes' show the files no task holds and their",
    "       allocation stacks from the same data.",
    "  leaks [--cache NAME].. [--min-age JIFFIES] [--type TYPE] [--ko FILE]",
    "       Allocated objects nothing reachable points to (kmemleak's answer",
    "       without CONFIG_DEBUG_KMEMLEAK): every word of kernel memory that",
    "       points into a slab object or vmalloc area, from the roots kmemleak",
    "       scans (kernel and module data, per-CPU areas, task stacks, other",
    "       kernel pages). Unreferenced cycles count. Grouped by cache, with",
    "       slub_debug=U's allocation stack and the typed contents when known.",
    "       The index is built once per session; refs reuses it.",
    "  refs ADDR|PLACE [--depth N] [--ko FILE]",
    "       Who points into the object holding ADDR, each word named (a member",
    "       of an object, a variable of the kernel or a module, a task's stack",
    "       frame, a per-CPU area); --depth N adds a chain from a root.",
    "  retained [--top N] [--by-type|--tree PLACE|--path PLACE|--paths-of TYPE]",
    "       What holds kernel memory: the dominator tree over the same index,",
    "       each object's retained size and its shortest path from a root.",
    "  profile --profile FILE|NAME [--set S] [--all] [--flagged] [--fail-on ...]",
    "       The object sets, holders and invariants a profile file declares.",
    " ",
    "  --json prints the documented leakref.* JSON schema instead of text.",
    "\nEXAMPLE",
    "  Inodes held open on one tmpfs, and who holds them:\n",
    "    %s> leakref inodes -t tmpfs",
    " ",
    "  Every super block with its active references, counted per filesystem type:\n",
    "    %s> leakref walk --type super_block --head super_blocks --list-member s_list \\",
    "          --refcount s_active --group-by s_type->name --summary",
    " ",
    "  Module references and their holders:\n",
    "    %s> leakref modules",
    " ",
    "  Every slab cache, then every dentry object with a count above one:\n",
    "    %s> leakref slab",
    "    %s> leakref slab --cache dentry --type dentry --refcount d_lockref \\",
    "          --where 'd_lockref.count > 1' --show d_name.name --summary",
    " ",
    "  Objects nothing points to, then who points at the first super block:\n",
    "    %s> leakref leaks",
    "    %s> leakref refs *super_blocks.next --depth 4",
    NULL};

static struct command_table_entry command_table[] = {
    {"leakref", cmd_leakref, help_leakref, 0},
    {NULL, NULL, NULL, 0},
};

/* crash 8.0.2 sizes struct pid without its trailing numbers[] flexible
 * array (Linux 6.1.y stable backport of b69f0aeb0689), reads garbage for
 * upid.ns and builds a task table holding only swapper: `ps` is empty and
 * `mount` spins. crash 8.0.4 fixed it (commit 88580068); on those versions,
 * and on kernels without the flexible array, this changes nothing. */
static void fix_pid_flex_array(void) {
  long numbers = MEMBER_OFFSET("pid", "numbers");
  long pid_size = STRUCT_SIZE("pid");
  long upid_size = STRUCT_SIZE("upid");
  if (numbers < 0 || pid_size <= 0 || upid_size <= 0) return;
  if (numbers >= pid_size && SIZE(pid) == pid_size) {
    ASSIGN_SIZE(pid) = pid_size + upid_size;
    tt->flags &= ~TASK_INIT_DONE;
    tt->refresh_task_table();
    sort_context_array();
    sort_tgid_array();
    tt->flags |= TASK_INIT_DONE;
    error(INFO, "leakref: applied the struct pid size fix (crash %s); %d tasks\n", build_version,
          RUNNING_TASKS());
  }
}

void __attribute__((constructor)) leakref_crash_init(void) {
  register_extension(command_table);
  fix_pid_flex_array();
}

void __attribute__((destructor)) leakref_crash_fini(void) {
  leakref_crash_unload();
}

static int host_read(uint64_t addr, void* buf, size_t len) {
  return readmem(addr, KVADDR, buf, (long)len, "leakref", RETURN_ON_ERROR | QUIET) ? 1 : 0;
}

static int host_kvtop(uint64_t vaddr, uint64_t* paddr) {
  physaddr_t pa = 0;
  if (!kvtop(CURRENT_CONTEXT(), (ulong)vaddr, &pa, 0)) return 0;
  *paddr = (uint64_t)pa;
  return 1;
}

static int host_symbol(const char* name, uint64_t* value) {
  struct syment* sp = symbol_search((char*)name);
  if (!sp) return 0;
  *value = (uint64_t)sp->value;
  return 1;
}

static int host_module_file(int i, const char** path) {
  int seen = 0;
  for (int m = 0; m < st->mods_installed; m++) {
    struct load_module* lm = &st->load_modules[m];
    if (!(lm->mod_flags & MOD_LOAD_SYMS) || !lm->mod_namelist[0]) continue;
    if (seen++ == i) {
      *path = lm->mod_namelist;
      return 1;
    }
  }
  return 0;
}

static int host_write(const char* text, size_t len) {
  if (fwrite(text, 1, len, fp) != len || ferror(fp)) return -1;
  return 0;
}

static void host_error(const char* text, size_t len) {
  /* error() adds "leakref: " itself. */
  static const char prefix[] = "leakref: ";
  if (len >= sizeof prefix - 1 && strncmp(text, prefix, sizeof prefix - 1) == 0) {
    text += sizeof prefix - 1;
    len -= sizeof prefix - 1;
  }
  error(INFO, "%.*s", (int)len, text);
}

static void on_sigint(int sig) {
  (void)sig;
  leakref_crash_interrupt();
}

static void cmd_leakref(void) {
  /* args[] is crash's global and is overwritten by any nested command: copy. */
  char* argv[MAXARGS + 1];
  int argc = 0;
  for (int i = 0; i < argcnt && i < MAXARGS; i++) argv[argc++] = args[i];
  argv[argc] = NULL;

  struct lr_host host;
  memset(&host, 0, sizeof host);
  host.read = host_read;
  host.kvtop = host_kvtop;
  host.symbol = host_symbol;
  host.write = host_write;
  host.error = host_error;
  host.module_file = host_module_file;
  host.namelist = pc->namelist_debug ? pc->namelist_debug : pc->namelist;
  host.dumpfile = pc->dumpfile ? pc->dumpfile : "";
  /* crash keeps minus the KASLR offset: runtime = vmlinux value - relocate. */
  host.kaslr_offset = (uint64_t)0 - (uint64_t)kt->relocate;
  host.live = (pc->flags & LIVE_SYSTEM) ? 1 : 0;

  /* crash's own SIGINT handler longjmps out of the signal handler, which
   * must never unwind C++ frames: a flag-setting handler runs instead for
   * the duration of the command. SIGPIPE stays ignored (crash's default);
   * a failed write to fp stops the output instead. */
  struct sigaction sa, old_int, old_pipe;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, &old_pipe);
  int rc = leakref_crash_run(&host, argc, argv);
  sigaction(SIGPIPE, &old_pipe, NULL);
  sigaction(SIGINT, &old_int, NULL);
  fflush(fp);
  if (rc != 0) error(INFO, "exit status %d\n", rc);
}
