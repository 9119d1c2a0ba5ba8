// Package testtls makes throwaway certificate authorities and certificates
// for tests of the TLS paths between nodes: a CA, and leaf certificates it
// signs for 127.0.0.1 and localhost, usable as server and client
// certificates. Nothing here is for production: keys are written
// unencrypted to the test's temporary directory.
package testtls
