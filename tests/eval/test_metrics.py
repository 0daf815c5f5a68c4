"""Metric functions against hand-computed values."""

from __future__ import annotations

import math

import pytest

from gateway.eval.metrics import auroc, confusion_at, matched_auroc, precision_recall_at
from gateway.eval.metrics import recall_at_fpr, threshold_at_fpr


def test_auroc_perfect_inverted_and_random() -> None:
    y = [False, False, True, True]
    assert auroc([0.1, 0.2, 0.8, 0.9], y) == 1.0
    assert auroc([0.9, 0.8, 0.2, 0.1], y) == 0.0
    assert auroc([0.5, 0.5, 0.5, 0.5], y) == 0.5


def test_auroc_hand_computed_with_ties() -> None:
    # positives 0.8, 0.4, 0.3; negatives 0.4, 0.2
    # pairs: (0.8>0.4)=1 (0.8>0.2)=1 (0.4=0.4)=.5 (0.4>0.2)=1 (0.3<0.4)=0 (0.3>0.2)=1 -> 4.5/6
    scores = [0.8, 0.4, 0.3, 0.4, 0.2]
    labels = [True, True, True, False, False]
    assert auroc(scores, labels) == pytest.approx(4.5 / 6)


def test_auroc_needs_both_classes_and_equal_lengths() -> None:
    with pytest.raises(ValueError):
        auroc([0.1, 0.2], [True, True])
    with pytest.raises(ValueError):
        auroc([0.1], [True, False])


def test_confusion_and_precision_recall_at_threshold() -> None:
    scores = [0.9, 0.7, 0.6, 0.4, 0.2]
    labels = [True, False, True, True, False]
    c = confusion_at(scores, labels, 0.6)  # flags 0.9, 0.7, 0.6
    assert (c.tp, c.fp, c.tn, c.fn) == (2, 1, 1, 1)
    assert c.fpr == 0.5
    assert precision_recall_at(scores, labels, 0.6) == pytest.approx((2 / 3, 2 / 3))
    assert precision_recall_at(scores, labels, 1.0) == (0.0, 0.0)


def test_threshold_and_recall_at_fpr() -> None:
    # 10 negatives at 0.0..0.9, positives at 0.95, 0.85, 0.5
    neg = [i / 10 for i in range(10)]
    scores = neg + [0.95, 0.85, 0.5]
    labels = [False] * 10 + [True] * 3
    # FPR <= 10% allows one negative (0.9) to be flagged: threshold 0.85 -> recall 2/3
    assert threshold_at_fpr(scores, labels, 0.10) == 0.85
    assert recall_at_fpr(scores, labels, 0.10) == pytest.approx(2 / 3)
    # FPR <= 5% allows none: threshold 0.95 -> recall 1/3
    assert threshold_at_fpr(scores, labels, 0.05) == 0.95
    assert recall_at_fpr(scores, labels, 0.05) == pytest.approx(1 / 3)


def test_recall_at_fpr_zero_when_top_score_is_negative_tie() -> None:
    assert recall_at_fpr([0.9, 0.9, 0.1], [True, False, False], 0.0) == 0.0
    assert threshold_at_fpr([0.9, 0.9, 0.1], [True, False, False], 0.0) == math.inf


def test_matched_auroc_only_compares_similar_covariates() -> None:
    scores = [0.9, 0.1, 0.2, 0.8]
    labels = [True, True, False, False]
    length = [10.0, 2.0, 2.0, 10.0]
    # pairs within 1.5x: (0.9 vs 0.8, len 10/10) win; (0.1 vs 0.2, len 2/2) loss
    assert matched_auroc(scores, labels, length) == (0.5, 2)
    value, pairs = matched_auroc(scores, labels, [1.0, 100.0, 10.0, 1000.0])
    assert pairs == 0 and math.isnan(value)


def test_matched_auroc_within_groups_skips_cross_group_pairs() -> None:
    # Two sources; across them the scores would rank wrongly (source b's negative
    # outscores source a's positive), within each source they rank perfectly.
    scores = [0.6, 0.2, 0.9, 0.8]
    labels = [True, False, True, False]
    length = [10.0, 10.0, 10.0, 10.0]
    groups = ["a", "a", "b", "b"]
    assert matched_auroc(scores, labels, length) == (0.75, 4)  # (0.6 vs 0.8) is a loss
    assert matched_auroc(scores, labels, length, groups=groups) == (1.0, 2)
    with pytest.raises(ValueError):
        matched_auroc(scores, labels, length, groups=["a"])
