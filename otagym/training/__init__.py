"""The training fidelity (issue 10, in progress): FedSGD over the air on a real torch model.

Imported on demand (torch is optional): ``from otagym.training import FedSGD``. So far this package holds the engine
of model A (§IV-A of the AdaScale paper): Poisson sampling, per-sample clipping, the device average (10), the
over-the-air aggregate with its receiver noise (13) and the update (12); the paper's MNIST CNN and a small digits
model; and scikit-learn's 8x8 digits split over devices. The env integration (``fidelity="train"``), MNIST/CIFAR
loaders and ``otagym compare --fidelity train`` are not built yet.
"""

from otagym.training.data import digits_dataset, partition
from otagym.training.federation import Federation, digits_federation
from otagym.training.fedsgd import FedSGD, clipped_gradient_sum, full_gradient_norm2, ota_aggregate, poisson_sample
from otagym.training.models import DigitsCNN, MnistCNN, num_parameters

__all__ = ["Federation", "digits_federation", "full_gradient_norm2", "FedSGD", "clipped_gradient_sum", "ota_aggregate", "poisson_sample", "MnistCNN", "DigitsCNN",
           "num_parameters", "digits_dataset", "partition"]
