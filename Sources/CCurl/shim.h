// Typed wrappers over libcurl's variadic calls, which Swift cannot call.
// Each wrapper names the C call it mirrors; Swift keeps all the logic.
#ifndef MEDIAFS_CCURL_SHIM_H
#define MEDIAFS_CCURL_SHIM_H
#include <curl/curl.h>
#include <syslog.h>

typedef size_t (*mediafs_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*mediafs_curl_xferinfo_cb)(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
                                        curl_off_t ultotal, curl_off_t ulnow);

/// curl_easy_setopt with a long argument.
static inline CURLcode mediafs_easy_setopt_long(CURL *h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
/// curl_easy_setopt with a curl_off_t argument.
static inline CURLcode mediafs_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
/// curl_easy_setopt with a string argument (libcurl copies it).
static inline CURLcode mediafs_easy_setopt_string(CURL *h, CURLoption o, const char *v) {
    return curl_easy_setopt(h, o, v);
}
/// curl_easy_setopt with a pointer argument (WRITEDATA, HEADERDATA, PRIVATE).
static inline CURLcode mediafs_easy_setopt_pointer(CURL *h, CURLoption o, void *v) {
    return curl_easy_setopt(h, o, v);
}
/// curl_easy_setopt with a header list (HTTPHEADER).
static inline CURLcode mediafs_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) {
    return curl_easy_setopt(h, o, v);
}
/// curl_easy_setopt with a write or header callback.
static inline CURLcode mediafs_easy_setopt_data_cb(CURL *h, CURLoption o, mediafs_curl_data_cb v) {
    return curl_easy_setopt(h, o, v);
}
/// An FTP wildcard transfer's CHUNK_BGN_FUNCTION: `info` is the entry's
/// struct curl_fileinfo, as libcurl's own LIST parser read it.
typedef long (*mediafs_chunk_bgn_cb)(const void *info, void *user, int remains);
static inline CURLcode mediafs_easy_setopt_chunk_bgn(CURL *h, mediafs_chunk_bgn_cb v) {
    return curl_easy_setopt(h, CURLOPT_CHUNK_BGN_FUNCTION, v);
}
/// CURL_CHUNK_BGN_FUNC_SKIP: the macro's cast keeps Swift from importing it.
static const long mediafs_chunk_skip = (long)CURL_CHUNK_BGN_FUNC_SKIP;
/// CURLAUTH_DIGEST, for CURLOPT_HTTPAUTH and CURLINFO_HTTPAUTH_AVAIL: the
/// macro's cast keeps Swift from importing it.
static const long mediafs_auth_digest = (long)CURLAUTH_DIGEST;
/// curl_easy_getinfo for a long result.
static inline CURLcode mediafs_easy_getinfo_long(CURL *h, CURLINFO i, long *v) {
    return curl_easy_getinfo(h, i, v);
}
/// curl_easy_getinfo for a string result (owned by the handle).
static inline CURLcode mediafs_easy_getinfo_string(CURL *h, CURLINFO i, char **v) {
    return curl_easy_getinfo(h, i, v);
}
/// curl_easy_getinfo for a curl_off_t result (CONTENT_LENGTH_DOWNLOAD_T).
static inline CURLcode mediafs_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) {
    return curl_easy_getinfo(h, i, v);
}
/// curl_easy_getinfo for a pointer result (PRIVATE).
static inline CURLcode mediafs_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) {
    return curl_easy_getinfo(h, i, v);
}
/// curl_multi_setopt with a long argument.
static inline CURLMcode mediafs_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}
/// syslog(3) with a fixed format, since syslog is variadic too.
static inline void mediafs_syslog(int priority, const char *message) {
    syslog(priority, "%s", message);
}
#endif
