"""Response input for scoring and the log-likelihood: scores aligned to a bank's item order."""
from __future__ import annotations

import numpy as np

from .bank import ItemBank

__all__ = ["response_array"]


def response_array(responses, bank: ItemBank, *, extra: str = "error") -> np.ndarray:
    """Scores as a float array in the bank's item order.

    ``responses`` is a ResponseMatrix (aligned by item id: bank items absent from the matrix are
    all-missing columns; matrix items absent from the bank are an error, or dropped with
    ``extra="ignore"``) or an array already in bank order with shape (n_subjects, n_items).
    """
    from ..responses import ResponseMatrix
    from ..responses import as_labelled_responses
    from ..validation import check_scores
    from .bank import check_bank

    check_bank(bank)
    responses = as_labelled_responses(responses)
    if isinstance(responses, ResponseMatrix):
        return responses.aligned_values(bank.item_ids, extra=extra)
    y = check_scores(responses)
    if y.ndim == 1:
        y = y[None, :]
    if y.ndim != 2 or y.shape[1] != len(bank):
        from ..errors import ResponseDataError

        raise ResponseDataError(
            f"responses have shape {y.shape} but the bank has {len(bank)} items; pass a "
            "ResponseMatrix or labelled DataFrame (aligned by item id) or an array with one "
            "column per bank item"
        )
    return y

