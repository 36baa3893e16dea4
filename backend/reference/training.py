"""CROSS_ENTROPY_LOSS (+ its backward), OPT_STEP_ADAMW, OPT_STEP_SGD, SILU_BACK and
RMS_NORM_BACK, from their definitions."""
from __future__ import annotations

import numpy as np

from . import reference


def _rows(a):
    a = np.asarray(a, np.float64)
    return a.reshape(-1, a.shape[-1])


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@reference("CROSS_ENTROPY_LOSS")
def cross_entropy_loss(node, logits, labels):
    """-(1 / rows) sum over rows and classes of labels * log_softmax(logits)."""
    z, p = _rows(logits), _rows(labels)
    return np.array([-(p * _log_softmax(z)).sum() / z.shape[0]])


@reference("CROSS_ENTROPY_LOSS_BACK")
def cross_entropy_loss_back(node, grad, logits, labels):
    """d loss / d logits = (softmax(logits) - labels) * grad / rows."""
    z, p = _rows(logits), _rows(labels)
    d = (np.exp(_log_softmax(z)) - p) * float(np.asarray(grad).reshape(-1)[0]) / z.shape[0]
    return d.reshape(np.shape(logits))


@reference("OPT_STEP_ADAMW")
def opt_step_adamw(node, w, g, m, v, params):
    """AdamW with decoupled weight decay; beta1h / beta2h are the bias corrections
    1 / (1 - beta^t) the caller computed:
        m' = beta1 m + (1 - beta1) g;  v' = beta2 v + (1 - beta2) g^2
        w' = w (1 - alpha wd) - alpha (m' beta1h) / (sqrt(v' beta2h) + eps)"""
    alpha, beta1, beta2, eps, wd, beta1h, beta2h = np.asarray(params, np.float64).reshape(-1)
    w, g, m, v = (np.asarray(a, np.float64) for a in (w, g, m, v))
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return w * (1 - alpha * wd) - alpha * (m * beta1h) / (np.sqrt(v * beta2h) + eps)


@reference("OPT_STEP_SGD")
def opt_step_sgd(node, w, g, params):
    """w' = w (1 - alpha wd) - alpha g."""
    alpha, wd = np.asarray(params, np.float64).reshape(-1)
    return np.asarray(w, np.float64) * (1 - alpha * wd) - alpha * np.asarray(g, np.float64)


@reference("SILU_BACK")
def silu_back(node, dy, x):
    """d silu(x) = dy * s (1 + x (1 - s)), s = sigmoid(x)."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    s = 1.0 / (1.0 + np.exp(-x))
    return dy * s * (1.0 + x * (1.0 - s))


@reference("RMS_NORM_BACK")
def rms_norm_back(node, dz, x):
    """Gradient of z = x / sqrt(mean(x^2) + eps) per row, given dz:
        dx = (dz - x * sum(x dz) / (sum(x^2) + n eps)) / sqrt(mean(x^2) + eps)"""
    eps = node.param_f32(0)
    x, dz = np.asarray(x, np.float64), np.asarray(dz, np.float64)
    n = x.shape[-1]
    sxx = (x * x).sum(axis=-1, keepdims=True)
    sxdz = (x * dz).sum(axis=-1, keepdims=True)
    return (dz - x * sxdz / (sxx + n * eps)) / np.sqrt(sxx / n + eps)
