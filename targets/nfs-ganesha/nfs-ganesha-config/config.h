/* config.h for nfs-ganesha 4.3 as Debian 12 builds it, for leakref's types
 * build (the source tarball has only config-h.in.cmake). The feature list is
 * read from the binary: the source directories named in its strings (9P, NLM,
 * RQUOTA, NFSACL, dbus, GSSAPI) and the libraries it links (krb5, wbclient,
 * nfsidmap, cap, blkid). Options left out (DEBUG_SAL, LTTNG, RDMA) are
 * Debian's defaults; the profile's hash-table walk checks the resulting
 * sizes against the ones ganesha records. */
#ifndef CONFIG_H
#define CONFIG_H
#define GSH_CHECK_VERSION(major,minor,micro,libmajor,libminor,libmicro) \
	((libmajor) > (major) || ((libmajor) == (major) && (libminor) > (minor)) || \
	((libmajor) == (major) && (libminor) == (minor) && (libmicro) >= (micro)))
#define GANESHA_VERSION_MAJOR 4
#define GANESHA_VERSION_MINOR 3
#define GANESHA_EXTRA_VERSION
#define GANESHA_VERSION "4.3"
#define VERSION GANESHA_VERSION
#define FSAL_MODULE_LOC "/usr/lib/x86_64-linux-gnu/ganesha"
#define _MSPAC_SUPPORT 1
#define USE_NFSIDMAP 1
#define USE_DBUS 1
#define USE_CAPS 1
#define USE_BLKID 1
#define _USE_9P 1
#define _USE_NFS3 1
#define _USE_NLM 1
#define _USE_RQUOTA 1
#define USE_NFSACL3 1
#define RPCBIND 1
#define HAVE_KRB5 1
#define LINUX 1
#define _HAVE_GSSAPI 1
#define HAVE_STRING_H 1
#define HAVE_STRNLEN 1
#define LITTLEEND 1
#define HAVE_DAEMON 1
#define NFS_GANESHA 1
#endif
