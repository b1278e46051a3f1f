"""A tiny class-conditional image-generation pipeline (Diffusers' DiT: a transformer denoiser, a VAE and a
DDIM scheduler) built from configs with random weights, offline, denoising on `neuron` eagerly or with
the denoiser compiled by `torch.compile(backend="neuron")`.

    python examples/hf/diffusers_pipeline.py [--compile] [--cpu]
"""
import argparse
import json

import torch
from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline, DiTTransformer2DModel


def tiny_pipeline(seed: int = 0) -> DiTPipeline:
    torch.manual_seed(seed)
    transformer = DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2, sample_size=8,
        patch_size=2, num_embeds_ada_norm=1000, norm_num_groups=8)  # DiT guides with class 1000
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16,),
                        down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
                        layers_per_block=1, norm_num_groups=8, sample_size=8)
    scheduler = DDIMScheduler(num_train_timesteps=100)
    # eval mode, as from_pretrained leaves models (in training mode DiT randomly drops class labels)
    transformer.eval()
    vae.eval()
    return DiTPipeline(transformer=transformer, vae=vae, scheduler=scheduler,
                       id2label={0: "cat", 1: "dog", 2: "boat"})


def generate(device: str, compile_denoiser: bool = False, steps: int = 4):
    pipeline = tiny_pipeline().to(device)
    pipeline.set_progress_bar_config(disable=True)
    if compile_denoiser:
        pipeline.transformer = torch.compile(pipeline.transformer, backend="neuron")
    images = pipeline(class_labels=[0, 2], num_inference_steps=steps, guidance_scale=2.0, output_type="np",
                      generator=torch.Generator().manual_seed(7)).images
    return torch.from_numpy(images)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    images = generate("cpu" if args.cpu else "neuron", args.compile)
    reference = images if args.cpu else generate("cpu")
    print("RESULT " + json.dumps({"shape": list(images.shape), "max_diff_vs_cpu": (images - reference).abs().max().item(),
                                  "mean": images.mean().item()}), flush=True)


if __name__ == "__main__":
    main()
