package chirouter_test

import (
	"testing"

	"github.com/idemgo/idem/examples/ecosystem/internal/routertest"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/routers/chirouter"
)

func TestOrders(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	routertest.Run(t, chirouter.Routes(routertest.ProtectT(t, testdb.StoreT(t), db.DB)), db)
}
