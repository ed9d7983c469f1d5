/* The narrow C interface between the crash extension's C shim (the only
 * file that sees crash's defs.h) and the C++ engine. Plain C types only. */
#ifndef LEAKREF_HOST_H
#define LEAKREF_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lr_host {
  /* Kernel virtual memory (readmem, RETURN_ON_ERROR|QUIET): 1 if all `len`
   * bytes were read, 0 if not. Never longjmps. */
  int (*read)(uint64_t addr, void* buf, size_t len);
  /* Virtual to physical (crash's kvtop in the current context): 1 and
   * *paddr, or 0 when unmapped. Lets the engine read an ELF dump directly. */
  int (*kvtop)(uint64_t vaddr, uint64_t* paddr);
  /* A symbol's runtime address as crash knows it (kernel and loaded
   * modules, symbol_search; never FATAL): 1 and *value, or 0. */
  int (*symbol)(const char* name, uint64_t* value);
  /* Command output (crash's fp: the terminal, a pager, a pipe or a file):
   * 0, or -1 once the reader has gone away (`| head`). */
  int (*write)(const char* text, size_t len);
  /* An error or warning line, shown the way crash shows its own. */
  void (*error)(const char* text, size_t len);
  /* The i-th module object file crash loaded symbols from (`mod -s`/`-S`):
   * 1 and *path, or 0 past the last. May be NULL (older shims). */
  int (*module_file)(int i, const char** path);
  const char* namelist;  /* vmlinux with DWARF that crash is using */
  const char* dumpfile;  /* the vmcore ("" on a live system) */
  uint64_t kaslr_offset; /* runtime address - vmlinux address */
  int live;              /* memory may change between commands */
};

/* Runs one `leakref ...` command line (argv[0] is "leakref"). Returns the
 * command's exit code (README "Exit codes"); never throws or longjmps. */
int leakref_crash_run(const struct lr_host* host, int argc, char** argv);
/* Async-signal-safe: asks a running command to stop (SIGINT). */
void leakref_crash_interrupt(void);
/* Frees the session (types, page cache) at `extend -u` or exit. */
void leakref_crash_unload(void);

#ifdef __cplusplus
}
#endif

#endif
