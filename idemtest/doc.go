// Package idemtest helps test code that uses idem, and dialects for it.
//
// Mock sets go-sqlmock expectations for the statements a Store sends, one
// call per outcome, so that a handler that calls Do can be unit-tested
// without a database and without knowing idem's SQL. For a handler behind
// the idemhttp middleware, Mock.ExpectRequest expects the claim of a request
// exactly as the middleware will see it.
//
// TestDialect runs the whole contract of Do against a real database through
// a Dialect, one named subtest per property: the built-in dialects pass it,
// and so must a new one. TestDriver runs the same properties with the
// Store's calls sent through a Driver of another package, such as idempgx on
// pgx's own interface.
//
// Import it from tests only: it brings in go-sqlmock and the testing
// package, which a service's own binary should not carry. It imports no SQL
// driver (TestPackagesPullNoDriver, in the root module), and its module
// requires none.
package idemtest
