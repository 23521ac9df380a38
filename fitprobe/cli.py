import click


@click.group()
def main():
    """fitprobe"""
