/*-------------------------------------------------------------------------
 *
 * base_spi.h
 *		Running dlock's internal SQL as its owner, with pinned settings and
 *		kept plans (base_spi.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_SPI_H
#define DLOCK_BASE_SPI_H



/* equality in dlock's internal SQL, immune to search_path */
#define EQ " OPERATOR(pg_catalog.=) "

typedef struct DlockSpi
{
	Oid			caller;			/* the role that called us: lease owner */
	Oid			owner;			/* owner of dlock's schema */
	int			sec_context;
	int			nestlevel;		/* GUC nest level of dlock's settings, or 0 */
} DlockSpi;

struct _SPI_plan;
extern Oid	dlock_schema_owner(void);
extern void dlock_spi_begin(DlockSpi *ctx);
extern void dlock_spi_end(DlockSpi *ctx);
extern void dlock_spi_as_caller(DlockSpi *ctx);
extern void dlock_spi_as_owner(DlockSpi *ctx);
extern struct _SPI_plan *dlock_spi_plan(struct _SPI_plan **cache, const char *sql,
										int nargs, Oid *argtypes);
extern uint64 dlock_spi_run(struct _SPI_plan *plan, Datum *values,
							const char *nulls, long tcount, int expect_rc);

#endif							/* DLOCK_BASE_SPI_H */
