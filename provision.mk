# What leakref and its tests need on the machine, and what the tests read
# from caches: the Debian packages (`make deps`, `make test-deps`), and
# `make provision`, which fills the caches of kernels, guests, other
# releases' glibc and allocators built from source (scripts/provision) that
# the tests would otherwise fill as they go. Included by the Makefile.
# What building and running leakref needs, and nothing else: the libraries,
# gdb (gcore), crash (its defs.h, for the extension; and crash itself) and
# python3 (scripts/gen-fields reads targets' TOML at build time).
DEB_DEPS := g++ make python3 pkg-config libdw-dev libelf-dev libfmt-dev libcli11-dev \
            nlohmann-json3-dev libdebuginfod-dev libkdumpfile-dev libtomlplusplus-dev \
            libsqlite3-dev libzstd-dev liblzma-dev liblz4-dev zlib1g-dev \
            gdb crash elfutils binutils
# What the tests need besides (make test installs them itself), in two
# parts: what building the tests and fixtures needs (Catch2, the headers of
# the programs fixtures link or extend (python3.11-dev: a C extension;
# libboost-dev: boost::intrusive_ptr; libc++: its containers), the
# aarch64 cross compilers, the ctags
# check-functions reads the sources with), installed before
# the build, and what running them needs (GlusterFS, nfs-ganesha, Slurm,
# bpftrace, QEMU and what a guest needs, mosh (its client, and what building
# its server from Debian's source needs), CPython 3.11 with its debug info
# (python3.11-dbg: the python test reads its objects), chromium for the HTML pages, the
# fuzzers' and formatter's clang, the tools the tests read with), installed
# while leakref builds. Kernels and their headers are not here:
# scripts/kernel-vmcore downloads them into its cache (and
# scripts/kernel-kmemleak builds one from linux-source-6.1: flex and bison).
TEST_BUILD_DEPS := catch2 universal-ctags libglusterfs-dev liburcu-dev libtirpc-dev libnfs-dev libntirpc-dev \
                   libkrb5-dev gcc-aarch64-linux-gnu g++-aarch64-linux-gnu python3.11-dev \
                   libboost-dev libc++-dev libc++abi-dev
TEST_RUN_DEPS := libc6-dbg python3 python3-jsonschema python3-drgn python3-networkx clang libclang-rt-14-dev \
                 clang-format glusterfs-server glusterfs-client fuse3 \
                 procps util-linux bpftrace bc time strace \
                 qemu-system-x86 qemu-system-arm qemu-user busybox-static cpio makedumpfile pahole \
                 flex bison man-db zsh nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils \
                 chromium sqlite3 zstd xz-utils lz4 gzip slurm-wlm munge \
                 libjemalloc2 libgoogle-perftools4 cmake \
                 mosh protobuf-compiler libprotobuf-dev libutempter-dev libncurses-dev libssl-dev \
                 python3.11 python3.11-dbg
TEST_DEPS := $(TEST_BUILD_DEPS) $(TEST_RUN_DEPS)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# apt-get install of the packages of $(1) that are not installed yet.
define apt_install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "$(2): installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "$(2): all installed"; fi
endef

# Installs the Debian 12 packages leakref needs to build and run.
deps:
	$(call apt_install,$(DEB_DEPS),deps)

# Installs what the tests need besides (make test installs the build's part
# first, the rest while it builds).
test-deps: deps
	$(call apt_install,$(TEST_DEPS),test-deps)
test-build-deps: deps
	$(call apt_install,$(TEST_BUILD_DEPS),test-build-deps)


# The caches the tests read, filled ahead of them (make test does it while
# leakref builds).
provision:
	scripts/provision
