/* SPDX-License-Identifier: MIT */
/*
 * Which MPI datatypes and reduction ops emunic can take.  Data movement
 * (bcast, alltoall, gather, allgather) needs contiguous bytes: a predefined
 * datatype whose size is its extent.  Reductions need the type and op to be
 * one of CALC's (<emunic/mq.h>): MPI's predefined ones, matched by handle
 * (Open MPI's handles are addresses, so a table rather than a switch).
 */
#include "mpi/mpi_int.h"


/* The C types by width, as MPI defines its types by the C ones. */
#define INT_OF(t) (sizeof(t) == 1 ? EMUNIC_CALC_INT8 : sizeof(t) == 2 ? EMUNIC_CALC_INT16 : \
		   sizeof(t) == 4 ? EMUNIC_CALC_INT32 : EMUNIC_CALC_INT64)
#define UINT_OF(t) (INT_OF(t) + 1)	/* each unsigned follows its signed */

/* Handles are address constants (Open MPI) or integers (MPICH): either may
 * initialise a static table. */
static const struct {
	MPI_Datatype mpi;
	int calc;
} types[] = {
	{ MPI_SIGNED_CHAR, EMUNIC_CALC_INT8 }, { MPI_INT8_T, EMUNIC_CALC_INT8 },
	{ MPI_UNSIGNED_CHAR, EMUNIC_CALC_UINT8 }, { MPI_UINT8_T, EMUNIC_CALC_UINT8 },
	{ MPI_SHORT, INT_OF(short) }, { MPI_INT16_T, EMUNIC_CALC_INT16 },
	{ MPI_UNSIGNED_SHORT, UINT_OF(short) }, { MPI_UINT16_T, EMUNIC_CALC_UINT16 },
	{ MPI_INT, INT_OF(int) }, { MPI_INT32_T, EMUNIC_CALC_INT32 },
	{ MPI_UNSIGNED, UINT_OF(int) }, { MPI_UINT32_T, EMUNIC_CALC_UINT32 },
	{ MPI_LONG, INT_OF(long) }, { MPI_UNSIGNED_LONG, UINT_OF(long) },
	{ MPI_LONG_LONG_INT, INT_OF(long long) }, { MPI_INT64_T, EMUNIC_CALC_INT64 },
	{ MPI_UNSIGNED_LONG_LONG, UINT_OF(long long) }, { MPI_UINT64_T, EMUNIC_CALC_UINT64 },
	{ MPI_FLOAT, EMUNIC_CALC_FLOAT }, { MPI_DOUBLE, EMUNIC_CALC_DOUBLE },
	{ MPI_FLOAT_INT, EMUNIC_CALC_FLOAT_INT }, { MPI_DOUBLE_INT, EMUNIC_CALC_DOUBLE_INT },
	{ MPI_LONG_INT, EMUNIC_CALC_LONG_INT }, { MPI_2INT, EMUNIC_CALC_2INT },
	{ MPI_SHORT_INT, EMUNIC_CALC_SHORT_INT },
};

static const struct {
	MPI_Op mpi;
	int calc;
} ops[] = {
	{ MPI_SUM, EMUNIC_CALC_SUM }, { MPI_PROD, EMUNIC_CALC_PROD },
	{ MPI_MIN, EMUNIC_CALC_MIN }, { MPI_MAX, EMUNIC_CALC_MAX },
	{ MPI_LAND, EMUNIC_CALC_LAND }, { MPI_LOR, EMUNIC_CALC_LOR },
	{ MPI_LXOR, EMUNIC_CALC_LXOR }, { MPI_BAND, EMUNIC_CALC_BAND },
	{ MPI_BOR, EMUNIC_CALC_BOR }, { MPI_BXOR, EMUNIC_CALC_BXOR },
	{ MPI_MINLOC, EMUNIC_CALC_MINLOC }, { MPI_MAXLOC, EMUNIC_CALC_MAXLOC },
};

const char *mpi_dtype_bytes(MPI_Datatype type, int count, size_t *bytes)
{
	int ni, na, nd, combiner, size;
	MPI_Aint lb, extent;

	if (count < 0)
		return "a negative count";
	if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
		return "an invalid datatype";
	if (combiner != MPI_COMBINER_NAMED)
		return "a derived datatype";
	PMPI_Type_size(type, &size);
	PMPI_Type_get_extent(type, &lb, &extent);
	if (lb != 0 || extent != size)
		return "a datatype with gaps (its extent is not its size)";
	*bytes = (size_t)count * (size_t)size;
	return NULL;
}

const char *mpi_dtype_calc(MPI_Datatype type, MPI_Op op, int *et, int *eo)
{
	*et = *eo = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && !*et; i++)
		if (types[i].mpi == type)
			*et = types[i].calc;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]) && !*eo; i++)
		if (ops[i].mpi == op)
			*eo = ops[i].calc;
	if (!*eo)
		return "a user-defined op (or REPLACE, NO_OP)";
	if (!*et)
		return "a datatype CALC does not reduce (derived, or not an integer, float or pair type)";
	if (emunic_calc_check(*eo, *et))
		return "an op the datatype does not take";
	return NULL;
}
