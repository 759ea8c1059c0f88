// OpenSSL's libcrypto, for the digest that names cache entries
// (EVP_Digest with EVP_sha256). Swift calls it directly: nothing to wrap.
#ifndef MEDIAFS_CCRYPTO_SHIM_H
#define MEDIAFS_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#endif
