"""Tables derived once from (bank, config), shared by every examinee of a CAT.

The posterior of each examinee lives on a fixed quadrature grid theta_1..theta_Q with the
normal prior N(prior_mean, prior_sd) as log weights (end nodes halved for the trapezoid rule).
Answering item j with score y adds y log P_j(theta_q) + (1 - y) log Q_j(theta_q) to node q, so
the tables hold log P and log Q of every item at every node, one contiguous (Q,) row per item
(Bock and Mislevy, 1982), together with the selection criterion, the stopping rules, item costs
and content balancing built from the config.

A bank with a ``dispersion`` column (continuous scores; :mod:`atlascat.irt.dispersion`) gets
the extended quasi-likelihood: the posterior's tables ``lp_post``, ``lq_post`` are log P / phi_j
and log Q / phi_j, and the information of every item (selection, the information SE, the
stopping rules) is divided by phi_j (:class:`~atlascat.cat.selection.ItemParams`). Without it
(0/1 answers) ``lp_post`` is ``lp`` itself.

Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6(4), 431-444.
"""
from __future__ import annotations

import hashlib
import weakref

import numpy as np

from ..errors import BankError, ConfigError
from ..irt import models
from ..irt.bank import ItemBank, warn_negative_slopes
from ..irt.quadrature import normal_quadrature
from .config import CATConfig
from .content import make_content_balancer
from .selection import InfoPruner, ItemParams, fisher_information, make_criterion
from .stopping import build_stop_rules

__all__ = ["bank_fingerprint", "bank_sha256"]


class _Tables:
    """Everything derived from (bank, config) once: grid, log P / log Q tables, components."""

    def __init__(self, bank: ItemBank, config: CATConfig):
        # no reference to the bank itself: the cache is keyed weakly by it
        from ..irt.dispersion import bank_dispersion

        self.dispersion = phi = bank_dispersion(bank)   # None: the Bernoulli likelihood
        self.params = ItemParams.from_bank(bank, phi)
        self.params_padded = self.params.padded()
        self.n_items = len(bank)
        est, stop = config.estimation, config.stopping
        quad = normal_quadrature(est.quadpts, est.theta_range, est.prior_mean, est.prior_sd)
        self.nodes = quad.nodes
        log_w = quad.log_weights.copy()
        if est.quadrature_rule == "trapezoid":
            log_w[[0, -1]] += np.log(0.5)
        self.log_prior = log_w - np.logaddexp.reduce(log_w)
        lp, lq = models.log_probability(self.nodes, *bank.params)
        self.lp = np.ascontiguousarray(lp.T)  # (J, Q): one contiguous row per item
        self.lq = np.ascontiguousarray(lq.T)
        if phi is None:
            self.lp_post, self.lq_post = self.lp, self.lq
        else:   # the extended quasi-likelihood: each item's term divided by phi_j
            self.lp_post = np.ascontiguousarray(self.lp / phi[:, None])
            self.lq_post = np.ascontiguousarray(self.lq / phi[:, None])
        self._info_nodes = None
        if est.method != "eap":   # MAP / ML / WLE: each item's S, I, J terms at every node
            from .estimators import node_tables

            self.s1, self.s0, self.info_w, self.warm = node_tables(self.nodes,
                                                                   self.params.table)
        self.rules = build_stop_rules(config)
        self.prior_precision = 1.0 / est.prior_sd ** 2
        # the precision the information SE adds to the test information (none for ML, WLE)
        self.se_precision = self.prior_precision if est.method in ("eap", "map") else 0.0
        # costs
        if stop.cost_column is not None:
            meta = bank.metadata
            if meta is None or stop.cost_column not in meta.columns:
                raise ConfigError(f"cost_column {stop.cost_column!r} is not a bank metadata column")
            import pandas as pd

            cost = pd.to_numeric(meta[stop.cost_column], errors="coerce").to_numpy(float)
            bad = np.flatnonzero(~(np.isfinite(cost) & (cost >= 0)))
            if bad.size:
                raise ConfigError(f"bank metadata column {stop.cost_column!r} must hold "
                                  "non-negative numeric costs for every item; item "
                                  f"{bank.item_ids[bad[0]]!r} has "
                                  f"{meta[stop.cost_column].iloc[bad[0]]} ({bad.size} such "
                                  "item(s))")
            self.item_cost = cost
            self.uniform_cost = bool(np.all(cost == cost[0]))
        else:
            self.item_cost = np.full(self.n_items, stop.cost_per_item or 0.0)
            self.uniform_cost = True
        if stop.budget is not None and self.n_items and self.item_cost.min() > stop.budget:
            cheap = int(np.argmin(self.item_cost))   # a test of no item: refused, not run
            raise ConfigError(f"budget {stop.budget:g} pays for no item: the cheapest, "
                              f"{bank.item_ids[cheap]!r}, costs {self.item_cost[cheap]:g}")
        self.criterion = make_criterion(config, self.params, self.item_cost)
        # exact shortcut for MFI on large 3PL banks (see selection.InfoPruner)
        self.pruner = None
        if (config.selection.criterion == "mfi" and not config.content.enabled
                and InfoPruner.applicable(self.params)):
            self.pruner = InfoPruner(self.params, est.theta_range)
        # content balancing (phase-2 component; None when off). Exposure control has state
        # (counts), so it belongs to the engine, not to these shared tables.
        self.content = make_content_balancer(bank, config)

    @property
    def info_nodes(self) -> np.ndarray:
        """Fisher information of every item at every grid node, (J, Q) (built on first use)."""
        if self._info_nodes is None:
            info = fisher_information(self.nodes[None, :], self.params.table[:, :, None])
            self._info_nodes = np.ascontiguousarray(info)
            self.info_nodes_padded = np.concatenate([info, np.zeros((1, info.shape[1]))])
        return self._info_nodes


_TABLE_CACHE: "weakref.WeakKeyDictionary[ItemBank, dict]" = weakref.WeakKeyDictionary()


def _tables(bank: ItemBank, config: CATConfig) -> _Tables:
    """Tables for (bank, config), cached per bank object and config."""
    if not isinstance(bank, ItemBank):
        hint = ("; an ordinal bank's live test is atlascat.OrdinalCATSession (simulate_cat "
                "takes either bank)" if type(bank).__name__ == "PolyBank" else
                "; load one with atlascat.load_bank(name) or ItemBank.read(path)")
        raise BankError(f"bank must be an ItemBank, got {type(bank).__name__}{hint}")
    key = config.cache_key()  # the cached tables hold the custom components: ids stay unique
    per_bank = _TABLE_CACHE.get(bank)
    if per_bank is None:     # the bank's first use by the adaptive test
        warn_negative_slopes(bank)
        per_bank = _TABLE_CACHE[bank] = {}
    tab = per_bank.get(key)
    if tab is None:
        if len(per_bank) > 8:
            per_bank.clear()
        tab = per_bank[key] = _Tables(bank, config)
    return tab


def bank_sha256(bank: ItemBank):
    """SHA-256 (a ``hashlib`` object, open to further ``update``) of a bank's item ids, joined
    by U+001F, then of each parameter array as little-endian float64, then (a bank with a
    ``dispersion`` column other than all 1) of the dispersions likewise. Any bank with
    ``item_ids`` and ``params`` (a sequence of arrays) is hashed the same way."""
    from ..irt.dispersion import bank_dispersion

    h = hashlib.sha256()
    h.update("\x1f".join(map(str, bank.item_ids)).encode())
    for arr in bank.params:
        h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
    phi = bank_dispersion(bank)
    if phi is not None:
        h.update(np.ascontiguousarray(phi, dtype="<f8").tobytes())
    return h


def bank_fingerprint(bank: ItemBank) -> str:
    """A short hash of the item ids and parameters (to check a resumed session's bank): the
    first 16 hex digits of :func:`bank_sha256`."""
    return bank_sha256(bank).hexdigest()[:16]

