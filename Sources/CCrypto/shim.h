// OpenSSL's libcrypto, for the digest that names cache entries
// (EVP_Digest with EVP_sha256) and for HLS segments encrypted with AES-128
// (EVP_DecryptInit_ex with EVP_aes_128_cbc). Swift calls both directly:
// nothing variadic, nothing to wrap.
#ifndef MEDIAFS_CCRYPTO_SHIM_H
#define MEDIAFS_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#endif
