// `--ftp-tls`: whether an `ftp://` session must turn to TLS (AUTH TLS)
// before it logs in. Required by default: FTP sends the password as typed,
// so it crosses the link in clear only when the user asked for plain FTP
// (`off`), or for TLS where the server offers it (`try`). `ftps://` is TLS
// from the first byte (implicit), whatever this says.
import CCurl

package enum FTPSecurity: String, Sendable, Equatable {
    case required
    case tried = "try"
    case off

    /// CURLOPT_USE_SSL's value.
    package var curlValue: Int {
        switch self {
        case .required: return Int(CURLUSESSL_ALL.rawValue)
        case .tried: return Int(CURLUSESSL_TRY.rawValue)
        case .off: return Int(CURLUSESSL_NONE.rawValue)
        }
    }
}
