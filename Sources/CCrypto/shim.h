// OpenSSL's libcrypto, for the digest that names cache entries
// (EVP_Digest with EVP_sha256) and for HLS segments encrypted with AES-128
// (EVP_DecryptInit_ex with EVP_aes_128_cbc), and the HMAC-SHA1 that
// OpenSSH's hashed known_hosts names are (HMAC with EVP_sha1). Swift calls
// them directly: nothing variadic, nothing to wrap.
#ifndef MEDIAFS_CCRYPTO_SHIM_H
#define MEDIAFS_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif
