"""The training fidelity: each scheme's federated training over the air on a real torch model.

Imported on demand (torch is optional): ``from otagym.training import FedSGD``. The environments use it under
``fidelity="train"`` (:mod:`otagym.fidelity`).

* :class:`Engine`: what every scheme's engine shares (model, data, metrics, divergence guard); engines of one
  architecture on the same data compute together (the ``*_all`` class methods: the envs of a vector env).
* :mod:`otagym.training.stacked`: E models as stacked parameters (``torch.func.functional_call`` under ``vmap``):
  per-sample clipped gradient sums, local steps, losses, accuracies and gradient norms of all E at once.
* :class:`FedSGD`: model A (§IV-A of the AdaScale paper, Moradi Kalarde et al., *Privacy Enhancement in
  Over-the-Air Federated Learning via Adaptive Receive Scaling*): Poisson sampling, per-sample clipping, the device
  average (10), the over-the-air aggregate with its receiver noise (13) and the update (12).
* Model B's engine is in its scheme's package: :class:`otagym.schemes.cdpb.training.CDPBTraining` (Algorithm 1 of
  the CDPB paper, Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power
  Balancing*): local steps, update clipping to W, the received signal (12)/(16) and the estimate (18).
* Models: :class:`MnistCNN` (the AdaScale paper's, d = 26,010), :class:`DigitsCNN`, :class:`CifarResNet`
  (d = 494,394).
* Data: scikit-learn's 8x8 digits (embedded), MNIST and Fashion-MNIST IDX files (Fashion-MNIST where Debian's
  ``dataset-fashion-mnist`` installs it, :data:`otagym.datasets.FASHION_MNIST_DIR`) and CIFAR-10 python batches from
  local files, IID or 2-classes-per-device partitions, random subsets to train or evaluate on;
  :func:`make_federation` puts a dataset, its split and its model together.
"""

from typing import Any

from otagym._moved import renamed
from otagym.training.data import digits_dataset, load_cifar10, load_mnist, partition, read_idx
from otagym.training.engine import Engine, full_gradient_norm2, mean_loss_and_accuracy
from otagym.training.federation import DATASETS, Federation, make_federation
from otagym.training.fedsgd import (FedSGD, UpdateRule, clipped_gradient_sum, clipped_gradient_sum_and_loss,
                                    ota_aggregate, poisson_sample, receiver_noise_std)
from otagym.training.models import CifarResNet, DigitsCNN, MnistCNN, num_parameters

__all__ = ["Engine", "FedSGD", "UpdateRule", "Federation", "DATASETS", "make_federation", "clipped_gradient_sum",
           "clipped_gradient_sum_and_loss",
           "ota_aggregate", "poisson_sample", "receiver_noise_std", "full_gradient_norm2",
           "mean_loss_and_accuracy", "MnistCNN", "DigitsCNN", "CifarResNet", "num_parameters", "digits_dataset",
           "partition", "read_idx", "load_mnist", "load_cifar10"]


def __getattr__(name: str) -> Any:
    return renamed(__name__, name)
