// libssh2, for SFTP listings (one directory read with its entries'
// attributes: size, mtime, type, which libcurl's sftp:// only gives as
// `ls -l` text) and reads on kept file handles. Its function-like macros are not callable from Swift:
// typed inline wrappers here, each named after the macro it stands for.
#ifndef MEDIAFS_CSSH2_SHIM_H
#define MEDIAFS_CSSH2_SHIM_H
#include <libssh2.h>
#include <libssh2_sftp.h>
#include <string.h>

/// libssh2_session_init()
static inline LIBSSH2_SESSION *mediafs_ssh_session_init(void) {
    return libssh2_session_init_ex(NULL, NULL, NULL, NULL);
}

/// libssh2_session_disconnect()
static inline int mediafs_ssh_disconnect(LIBSSH2_SESSION *session) {
    return libssh2_session_disconnect_ex(session, SSH_DISCONNECT_BY_APPLICATION, "done", "");
}

/// libssh2_sftp_opendir()
static inline LIBSSH2_SFTP_HANDLE *mediafs_sftp_opendir(LIBSSH2_SFTP *sftp, const char *path) {
    return libssh2_sftp_open_ex(sftp, path, (unsigned int)strlen(path), 0, 0, LIBSSH2_SFTP_OPENDIR);
}

/// libssh2_sftp_stat()
static inline int mediafs_sftp_stat(LIBSSH2_SFTP *sftp, const char *path, LIBSSH2_SFTP_ATTRIBUTES *attrs) {
    return libssh2_sftp_stat_ex(sftp, path, (unsigned int)strlen(path), LIBSSH2_SFTP_STAT, attrs);
}

/// libssh2_sftp_open() of a file, for reading.
static inline LIBSSH2_SFTP_HANDLE *mediafs_sftp_open_read(LIBSSH2_SFTP *sftp, const char *path) {
    return libssh2_sftp_open_ex(sftp, path, (unsigned int)strlen(path), LIBSSH2_FXF_READ, 0, LIBSSH2_SFTP_OPENFILE);
}

/// libssh2_sftp_fstat()
static inline int mediafs_sftp_fstat(LIBSSH2_SFTP_HANDLE *handle, LIBSSH2_SFTP_ATTRIBUTES *attrs) {
    return libssh2_sftp_fstat_ex(handle, attrs, 0);
}

/// libssh2_userauth_password()
static inline int mediafs_ssh_password(LIBSSH2_SESSION *session, const char *user, const char *password) {
    return libssh2_userauth_password_ex(session, user, (unsigned int)strlen(user), password,
                                        (unsigned int)strlen(password), NULL);
}

/// libssh2_userauth_publickey_fromfile()
static inline int mediafs_ssh_publickey_file(LIBSSH2_SESSION *session, const char *user, const char *privateKey) {
    return libssh2_userauth_publickey_fromfile_ex(session, user, (unsigned int)strlen(user), NULL, privateKey, NULL);
}

static inline unsigned long mediafs_sftp_type_mask(void) { return LIBSSH2_SFTP_S_IFMT; }
static inline unsigned long mediafs_sftp_type_dir(void) { return LIBSSH2_SFTP_S_IFDIR; }
static inline unsigned long mediafs_sftp_type_regular(void) { return LIBSSH2_SFTP_S_IFREG; }
static inline unsigned long mediafs_sftp_type_link(void) { return LIBSSH2_SFTP_S_IFLNK; }
#endif
